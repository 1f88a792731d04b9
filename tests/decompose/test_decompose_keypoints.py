"""Keypoint matching as a chain (detector L, descriptor C|L) on real benchmark outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from matplotlib.axes import Axes

import metricalc as mc
from metricalc.decompose import (
    detector_or_descriptor,
    factor_ap,
    keypoint_chains,
    matching_identity,
    verify,
)
from metricalc.decompose.keypoints import ASSUMPTIONS, HOW_DECIDED


@pytest.fixture(scope="module")
def cube(quick_locked_cube):
    """The built-in benchmark (quick scenes), SIFT and ORB on SIFT keypoints (the session's,
    tests/conftest.py)."""
    return quick_locked_cube


def test_identity_on_the_builtin_benchmark(cube):
    identity = matching_identity(cube)
    assert (identity.deviation < 1e-12).all()
    defined = identity.deviation_by_pair.notnull()
    assert int(defined.sum()) > 10 and (identity.deviation_by_pair.where(defined, 0) < 1e-12).all()
    # independent counts from the cube
    for name in ("sift", "orb"):
        one = cube.sel(descriptor=name)
        present = one.n_relevant.values >= 0
        repeatable = (one.n_relevant.values == 1).sum()
        correct = (one.nn_correct.values == 1).sum()
        row = identity.sel(descriptor=name)
        assert float(row.repeatability) == repeatable / present.sum()
        assert float(row.correct_over_repeatable) == correct / repeatable
        assert float(row.matching_score) == correct / present.sum()
    chains = keypoint_chains(cube)
    check = verify(chains)
    assert check.ok and check.points_checked > 1000


def test_chain_counts_and_loosest_point(cube):
    chains = keypoint_chains(cube, confidence="distance")
    identity = matching_identity(cube)
    for name in ("sift", "orb"):
        one = cube.sel(descriptor=name)
        has_nn = np.isfinite(one.nn_distance.values) & (one.n_relevant.values >= 0)
        assert has_nn.all()  # every query has a nearest neighbour on this benchmark
        chain = chains.sel(descriptor=name)
        confidence = -one.nn_distance.values
        for j in np.linspace(0, chain.sizes["threshold"] - 1, 7).astype(int):
            cut = chain.cutoff.values[j]
            if np.isnan(cut):
                continue
            kept = confidence >= cut
            assert chain.n_selected.values[j] == kept.sum()
            repeatable, correct = one.n_relevant.values == 1, one.nn_correct.values == 1
            assert chain.tp.sel(stage="L").values[j] == (kept & repeatable).sum()
            assert chain.tp.sel(stage="C|L").values[j] == (kept & correct).sum()
        last = chain.isel(threshold=int(np.isfinite(chain.cutoff.values).sum()) - 1)
        row = identity.sel(descriptor=name)
        assert float(last.factor_recall.sel(stage="L")) == pytest.approx(float(row.repeatability))
        assert float(last.factor_recall.sel(stage="C|L")) == pytest.approx(
            float(row.correct_over_repeatable)
        )
        assert float(last.recall) == pytest.approx(float(row.matching_score))


def test_ratio_confidence_gives_the_ratio_test_pr_curve(cube):
    """Composed precision is metricalc.matching_pr_curve's; recall differs only by denominator
    (all queries here, matchable queries there)."""
    chains = keypoint_chains(cube, confidence="ratio")
    curve = mc.matching_pr_curve(cube)
    for name in ("sift", "orb"):
        mine, theirs = chains.sel(descriptor=name), curve.sel(descriptor=name)
        n = int(np.isfinite(theirs.cutoff.values).sum())
        np.testing.assert_array_equal(mine.cutoff.values[:n], theirs.cutoff.values[:n])
        np.testing.assert_array_equal(mine.precision.values[:n], theirs.precision.values[:n])
        queries = int(mine.n_ground_truth.values[0])
        np.testing.assert_allclose(
            mine.recall.values[:n] * queries, theirs.recall.values[:n] * int(theirs.n_matchable)
        )


def test_detector_or_descriptor_section(cube):
    """The verdict follows the two factors, counted here from the cube: the lower of
    repeatability and correct among repeatable limits; the sentence quotes both."""
    section = detector_or_descriptor(cube)
    table = section.table
    np.testing.assert_allclose(table.matching_ap, factor_ap(keypoint_chains(cube)).ap)
    assert "ap_perfect_detector" not in table and section.chains.attrs["confidence"] == "ratio"
    for name in ("sift", "orb"):
        one = cube.sel(descriptor=name)
        repeatable = int((one.n_relevant.values == 1).sum())
        rep = repeatable / int((one.n_relevant.values >= 0).sum())
        cor = int((one.nn_correct.values == 1).sum()) / repeatable
        expected = "detector" if rep < cor else "descriptor" if cor < rep else "both"
        assert str(table.limited_by.sel(descriptor=name).values) == expected
        low, high = (rep, cor) if expected == "detector" else (cor, rep)
        assert f"{name} {100 * low:.1f} % < {100 * high:.1f} %" in section.sentence
        assert section.sentence.index(f"The {expected} limits") < section.sentence.index(name)
    assert HOW_DECIDED in section.sentence and section.sentence.endswith(ASSUMPTIONS)
    named = detector_or_descriptor(cube, names={"sift": "SIFT", "orb": "ORB"}).sentence
    assert named == section.sentence.replace("sift", "SIFT").replace("orb", "ORB")
    assert "within the pixel threshold (repeatability 100 %)" in ASSUMPTIONS
    assert isinstance(section.plot(), Axes)
    payload = json.loads(json.dumps(section.to_dict()))
    assert set(payload["descriptors"]) == {"sift", "orb"}
    assert payload["identity"]["ok"] is True


def factor_cube(repeatable: int, correct: int, queries: int = 100) -> xr.Dataset:
    """One descriptor "d": ``repeatable`` of ``queries`` queries repeatable, the first
    ``correct`` of them matched correctly (the most confident), the rest wrong."""
    index = np.arange(queries)
    n_relevant = (index < repeatable).astype(np.int8)
    nn_correct = (index < correct).astype(np.int8)
    distance = 1.0 + index / queries
    dims = ("descriptor", "query")
    return xr.Dataset(
        {
            "n_relevant": (dims, n_relevant[None]),
            "nn_correct": (dims, nn_correct[None]),
            "nn_distance": (dims, distance[None]),
            "nn2_distance": (dims, 2 * distance[None]),
        },
        coords={"descriptor": ["d"]},
    )


@pytest.mark.parametrize(
    ("repeatable", "correct", "expected"),
    [
        (58, 5, "descriptor"),  # a weak descriptor on a fair detector: 8.6 % of 58 % correct
        (20, 18, "detector"),  # 20 % repeatable, 90 % of those matched
        (50, 25, "both"),  # 50 % and 50 %
    ],
)
def test_the_verdict_follows_the_factors_on_built_cases(repeatable, correct, expected):
    section = detector_or_descriptor(factor_cube(repeatable, correct))
    row = section.table.sel(descriptor="d")
    assert float(row.repeatability) == repeatable / 100
    assert float(row.correct_over_repeatable) == correct / repeatable
    assert str(row.limited_by.values) == expected
    if expected == "both":
        assert "Detector and descriptor limit d (both factors 50.0 %) equally." in section.sentence
    else:
        assert section.sentence.startswith(f"The {expected} limits d: ")
    # the rule is the larger gain of the matching score: a perfect detector raises it to C|L,
    # a perfect descriptor to L
    gain = {"detector": correct / repeatable, "descriptor": repeatable / 100}
    if expected != "both":
        assert gain[expected] > gain["descriptor" if expected == "detector" else "detector"]


def test_the_factor_curves_end_at_the_table(cube):
    """factor_curves.png: named descriptors, and at 100 % kept the L and C|L lines are the
    table's repeatability and correct among repeatable (not an interpolated 100 %)."""
    from metricalc.decompose.figures import plot_keypoint_factors

    section = detector_or_descriptor(cube)
    ax = plot_keypoint_factors(section.chains, names={"sift": "SIFT", "orb": "ORB"})
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "SIFT" in legend and "ORB" in legend
    lines = [line for line in ax.get_lines() if len(line.get_xdata())]
    ends = sorted(float(line.get_ydata()[-1]) for line in lines
                  if line.get_xdata()[-1] == pytest.approx(100))  # fmt: skip
    factors = ("repeatability", "correct_over_repeatable")
    expected = [100 * float(section.table[v].sel(descriptor=d))
                for d in ("sift", "orb") for v in factors]  # fmt: skip
    np.testing.assert_allclose(ends, sorted(expected), atol=1e-6)


def small_cube() -> xr.Dataset:
    """Two descriptors: "a" sees queries 0..3, "b" failed (status error)."""
    dims = ("descriptor", "query")
    return xr.Dataset(
        {
            "n_relevant": (dims, np.array([[1, 1, 0, 1, -1], [1, 1, 0, 1, 1]], np.int8)),
            "nn_correct": (dims, np.array([[1, 0, 0, 1, -1], [1, 1, 0, 1, 1]], np.int8)),
            "nn_distance": (dims, np.array([[0.1, 0.5, 0.2, 0.4, np.nan], [1, 1, 1, 1, 1.0]])),
            "nn2_distance": (dims, np.array([[0.2, 0.6, 0.3, 0.8, np.nan], [2, 2, 2, 2, 2.0]])),
            "status": ("descriptor", np.array(["ok", "error"], dtype=object)),
        },
        coords={"descriptor": ["a", "b"]},
    )


def test_small_cube_by_hand():
    chains = keypoint_chains(small_cube(), confidence="distance")
    a = chains.sel(descriptor="a")
    # confidences -0.1 (R, correct), -0.2 (not repeatable), -0.4 (R, correct), -0.5 (R, wrong)
    assert a.cutoff.values.tolist() == [-0.1, -0.2, -0.4, -0.5]
    assert a.tp.values.tolist() == [[1, 1, 2, 3], [1, 1, 2, 2]]
    assert a.n_ground_truth.values.tolist() == [4, 4]
    b = chains.sel(descriptor="b")
    assert b.n_selected.values.max() == 0 and b.n_ground_truth.values.tolist() == [0, 0]
    section = detector_or_descriptor(small_cube())
    assert section.table.limited_by.values.tolist()[1] == "-"
    assert np.isnan(float(section.table.matching_ap.sel(descriptor="b")))


def test_bad_cube_is_named():
    with pytest.raises(mc.InvalidInputError, match="nn2_distance"):
        keypoint_chains(small_cube().drop_vars("nn2_distance"))
    with pytest.raises(mc.InvalidInputError, match="confidence must be one of"):
        keypoint_chains(small_cube(), confidence="score")


def test_cli_keypoints(cube, tmp_path):
    from tests.cli.test_cli import run

    path = tmp_path / "cube.nc"
    mc.cube.save(cube, path)
    result = run("decompose", "keypoints", str(path), "--json", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    expected = detector_or_descriptor(cube).to_dict()
    assert payload["confidence"] == "ratio"  # the report's default: one matching AP
    assert payload["sentence"] == expected["sentence"]
    assert payload["descriptors"]["sift"]["matching_ap"] == pytest.approx(
        expected["descriptors"]["sift"]["matching_ap"]
    )
    for name in ("detector_or_descriptor", "factor_curves"):
        assert (tmp_path / "out" / f"{name}.png").exists()
        assert (tmp_path / "out" / f"{name}.svg").exists()
    text = run("decompose", "keypoints", str(path), "--confidence", "distance")
    assert text.returncode == 0, text.stderr
    assert "Detector or descriptor?" in text.stdout and "identity" in text.stdout
    missing = run("decompose", "keypoints", str(tmp_path / "nope.nc"))
    assert missing.returncode == 2 and missing.stderr.startswith("metricalc: error:")
