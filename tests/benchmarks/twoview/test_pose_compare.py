"""`metricalc compare POSE.nc`: the methods of a pose run compared on every column of the pose
table, checked against the table itself and a slow enumeration of the swap patterns; the
estimator vs sampling noise of `pose eval --seeds` against a slow bootstrap."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc.benchmarks.twoview.accuracy import imc_maa, pose_auc
from metricalc.benchmarks.twoview.evaluate import summarize
from metricalc.benchmarks.twoview.pairs import read_pairs, write_pairs
from metricalc.benchmarks.twoview.statistic import COLUMNS, compare_pose, seed_noise
from metricalc.cli import main
from metricalc.errors import InvalidInputError
from metricalc.stats.clustered import intraclass_correlation
from metricalc.stats.compare import generators

SCENES = ["hall", "hall", "yard", "tower", "bridge", "gate"]  # pair k's scene: 5 clusters


def _table_value(errors: np.ndarray, column: str) -> float:
    """The table's cell (the functions `pose eval` prints) of one method's errors."""
    if column == "mAA@10":
        return imc_maa(errors)
    return float(pose_auc(errors, [float(column[4:])])[0])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic pose run whose pair list keeps each scene's images in a folder."""
    root = tmp_path_factory.mktemp("pose")
    assert main(["pose", "make-dataset", str(root), "--n-pairs", "6", "--seed", "2"]) == 0
    pairs = []
    for scene, pair in zip(SCENES, read_pairs(root / "pairs.txt"), strict=True):
        (root / "scenes" / scene).mkdir(parents=True, exist_ok=True)
        for name in (pair.name0, pair.name1):
            shutil.copy(root / "images" / name, root / "scenes" / scene / name)
        pairs.append(type(pair)(f"{scene}/{pair.name0}", f"{scene}/{pair.name1}", pair.K0,
                                pair.K1, pair.T_0to1))
    write_pairs(root / "scenes.txt", pairs)
    out = root / "pose.nc"
    assert main(["pose", "eval", "--pairs", str(root / "scenes.txt"), "--images",
                 str(root / "scenes"), "--method", "sift", "--method", "orb",
                 "--max-keypoints", "500", "--out", str(out), "--json"]) == 0
    return out


def test_records_carry_the_scenes(run: Path) -> None:
    with xr.open_dataset(run, engine="h5netcdf") as results:
        assert results["scene"].values.tolist() == SCENES
        assert results["pose_error"].dims == ("descriptor", "pair")


def test_compare_equals_the_table_and_the_enumeration(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["compare", str(run), "--json"]) == 0
    rows = {row["column"]: row for row in json.loads(capsys.readouterr().out)}
    with xr.open_dataset(run, engine="h5netcdf") as opened:
        results = opened.load()
    table = summarize(results)
    errors = results["pose_error"].values  # sift, orb
    clusters = sorted(set(SCENES))
    for column in COLUMNS:
        row = rows[column]
        assert (row["descriptor"], row["baseline"], row["n"]) == ("sift", "orb", 5)
        estimate = float(table[column].sel(descriptor="sift") - table[column].sel(descriptor="orb"))
        assert row["mean_diff"] == pytest.approx(estimate, rel=1e-12, abs=1e-15)
        # every way of exchanging the two methods' errors inside a set of scenes
        extreme = 0
        for swapped in itertools.product([False, True], repeat=len(clusters)):
            moved = np.isin(SCENES, [c for c, s in zip(clusters, swapped, strict=True) if s])
            a = np.where(moved, errors[1], errors[0])
            b = np.where(moved, errors[0], errors[1])
            t = _table_value(a, column) - _table_value(b, column)
            extreme += abs(t) >= abs(estimate) - 1e-12
        assert row["pvalue"] == extreme / 2 ** len(clusters) and row["exact"]
        assert row["ci_low"] <= estimate <= row["ci_high"]


def test_pairs_alone_and_terminal_table(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", str(run), "--pair-by", "pair", "--metric", "auc@10"]) == 0
    out = capsys.readouterr().out
    assert "auc@10" in out and "independent unit: image pairs" in out and "mAA@10" not in out
    assert "sift vs orb: ICC" in out  # what testing over pairs ignores
    with xr.open_dataset(run, engine="h5netcdf") as opened:
        results = opened.load()
    by_pair = compare_pose(results, columns=["auc@10"], pair_by="pair")["auc@10"]
    assert int(by_pair.n[0]) == 6
    # a file written before scenes were recorded: every pair is a unit of its own
    older = compare_pose(results.drop_vars("scene"), columns=["auc@10"])["auc@10"]
    assert int(older.n[0]) == 6 and float(older.pvalue[0]) == float(by_pair.pvalue[0])
    errors = results["pose_error"].values
    d = [_table_value(errors[0, [k]], "auc@10") - _table_value(errors[1, [k]], "auc@10")
         for k in range(6)]
    icc, deff = intraclass_correlation(np.array(d), np.array(SCENES))
    assert float(by_pair.icc[0]) == pytest.approx(icc, rel=1e-9)
    assert float(by_pair.design_effect[0]) == pytest.approx(deff, rel=1e-9)


def test_too_few_scenes_names_the_pair_level() -> None:
    errors = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 30.0], [2.0, 4.0, 6.0, 8.0, 10.0, 50.0]])
    results = xr.Dataset(
        {"pose_error": (("descriptor", "pair"), errors)},
        coords={"descriptor": ["a", "b"], "pair": [f"p{k}" for k in range(6)],
                "scene": ("pair", ["s", "s", "s", "u", "u", "u"])},
    )
    with pytest.raises(InvalidInputError, match=r"2 independent units .* pair_by='pair'"):
        compare_pose(results)
    by_pair = compare_pose(results, columns=["auc@20"], pair_by="pair")["auc@20"]
    # b is worse on p0..p4; p5 is beyond 20 degrees in both, so swapping it changes nothing:
    # none / all of p0..p4 swapped, each with p5 swapped or not, are the 4 extreme patterns
    assert float(by_pair.pvalue[0]) == 4 / 64


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--split", "viewpoint"], "--split does not apply to pose results"),
        (["--pair-by", "query"], "pair by scene (default) or image pair"),
        (["--metric", "ap@5"], "has the columns auc@5, auc@10, auc@20, mAA@10"),
    ],
)
def test_options_that_do_not_apply(run: Path, capsys: pytest.CaptureFixture[str],
                                   argv: list[str], message: str) -> None:
    capsys.readouterr()
    assert main(["compare", str(run), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_pose_file_among_cubes(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", str(run), str(run)]) == 2
    assert "are compared alone" in capsys.readouterr().err


def test_seed_noise_against_a_slow_bootstrap() -> None:
    rng = np.random.default_rng(4)
    errors = rng.choice([0.5, 1.0, 3.0, 7.0, 12.0, 25.0, np.inf], size=(2, 3, 5))
    results = xr.Dataset(
        {"pose_error": (("descriptor", "seed", "pair"), errors)},
        coords={"descriptor": ["a", "b"], "seed": [0, 1, 2], "pair": ["p", "r", "x", "s", "t"],
                "scene": ("pair", ["s", "s", "u", "", ""])},
    )
    noise = seed_noise(results, seed=3, n_resamples=50)
    assert noise.attrs["n_clusters"] == 4 and noise.attrs["n_seeds"] == 3
    # clusters: the pairs s (named like the scene s) and t alone, then the scenes s and u
    cluster_of = np.array([2, 2, 3, 0, 1])
    _, draws = generators(3)
    weights = draws.multinomial(4, np.full(4, 0.25), size=50)
    for column in COLUMNS:
        per_seed = [_table_value(errors[0, k], column) - _table_value(errors[1, k], column)
                    for k in range(3)]
        boot = [np.mean([_table_value(np.repeat(errors[0, k], w[cluster_of]), column)
                         - _table_value(np.repeat(errors[1, k], w[cluster_of]), column)
                         for k in range(3)]) for w in weights]
        got = noise.sel(column=column).isel(comparison=0)
        assert float(got.difference) == pytest.approx(np.mean(per_seed), rel=1e-12, abs=1e-15)
        assert float(got.sd_seed) == pytest.approx(np.std(per_seed, ddof=1), rel=1e-9, abs=1e-15)
        assert float(got.se_bootstrap) == pytest.approx(np.std(boot, ddof=1), rel=1e-9, abs=1e-15)
        sd2, se2 = np.var(per_seed, ddof=1), np.var(boot, ddof=1)
        assert float(got.share_seed) == pytest.approx(sd2 / (sd2 + se2), rel=1e-9)
