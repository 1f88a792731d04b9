"""`metricalc compare CUBE --metric mma@T`: D2-Net's MMA compared over image pairs clustered by
scene, checked against `matching_accuracy` (the table's number) and a slow enumeration of the
within-scene swaps."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc import cube as cubes
from metricalc import matching_accuracy
from metricalc.cli import main
from metricalc.datasets.clustered import clustered_cube
from metricalc.metrics import pair_matching_accuracy

SCENES = 6


def _cube(seed: int) -> xr.Dataset:
    """A keypoint cube of 6 scenes x 5 pairs x 20 queries with random matches and errors;
    pair v_s1/1-3 of the second descriptor has no mutual match (D2-Net: accuracy 0)."""
    rng = np.random.default_rng(seed)
    cube = clustered_cube(rng, scenes=SCENES, pairs=5, queries=20)
    shape = cube["ap"].shape
    cube["nn_error"] = ("descriptor", "query"), np.round(rng.exponential(3.0, shape), 1)
    mutual = (rng.random(shape) < 0.7).astype(np.int8)
    units = np.char.add(np.char.add(cube["scene"].values.astype(str), "/"),
                        cube["pair"].values.astype(str))  # fmt: skip
    mutual[1, units == np.unique(units)[2]] = 0
    cube["nn_mutual"] = ("descriptor", "query"), mutual
    return cube


def _slow_mma(cube: xr.Dataset, descriptor: int, threshold: float) -> dict[str, float]:
    """Per image pair: mutual matches within the threshold / mutual matches (0 without)."""
    units = np.char.add(np.char.add(cube["scene"].values.astype(str), "/"),
                        cube["pair"].values.astype(str))  # fmt: skip
    error = cube["nn_error"].values[descriptor]
    mutual = cube["nn_mutual"].values[descriptor] == 1
    out = {}
    for unit in np.unique(units):
        matches = mutual & (units == unit)
        out[str(unit)] = float((error[matches] <= threshold).mean()) if matches.any() else 0.0
    return out


@pytest.fixture(scope="module")
def cube_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mma") / "cube.nc"
    cubes.save(_cube(7), path)
    return path


def test_pair_accuracy_is_the_slow_definition_and_its_mean_the_mma() -> None:
    cube = _cube(3)
    for threshold in (1.0, 3.0, 4.5):
        accuracy = pair_matching_accuracy(cube, threshold)
        for d in range(cube.sizes["descriptor"]):
            slow = _slow_mma(cube, d, threshold)
            assert accuracy["pair"].values.tolist() == sorted(slow)
            np.testing.assert_allclose(accuracy.values[d], [slow[u] for u in sorted(slow)])
        table = matching_accuracy(cube, [threshold]).isel(threshold=0)
        np.testing.assert_allclose(accuracy.mean("pair").values, table.values, rtol=1e-12)


def test_compare_equals_the_table_and_the_enumeration(
    cube_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["compare", str(cube_file), "--metric", "mma@3", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    cube = cubes.open_cube(cube_file).load()
    names = cube["descriptor"].values.tolist()
    table = matching_accuracy(cube, [3.0]).isel(threshold=0)
    d, b = names.index(row["descriptor"]), names.index(row["baseline"])
    estimate = float(table[d] - table[b])
    assert row["column"] == "mma@3" and row["n"] == SCENES
    assert row["mean_diff"] == pytest.approx(estimate, rel=1e-12)
    first, second = _slow_mma(cube, d, 3.0), _slow_mma(cube, b, 3.0)
    units = sorted(first)
    scene_of = np.array([u.split("/")[0] for u in units])
    a, c = np.array([first[u] for u in units]), np.array([second[u] for u in units])
    extreme = 0
    for swapped in itertools.product([False, True], repeat=SCENES):
        moved = np.isin(scene_of, np.unique(scene_of)[np.array(swapped)])
        diff = np.where(moved, c, a).mean() - np.where(moved, a, c).mean()
        extreme += abs(diff) >= abs(estimate) * (1 - 1e-9) - 1e-12
    assert row["pvalue"] == pytest.approx(extreme / 2**SCENES, rel=1e-12)
    assert row["ci_low"] <= estimate <= row["ci_high"]


def test_terminal_pairs_and_two_cubes(
    cube_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.nc"
    cubes.save(_cube(8), other)
    capsys.readouterr()
    assert main(["compare", str(cube_file), str(other), "--metric", "MMA@2", "--pair-by",
                 "pair", "--labels", "a,b"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "mean matching accuracy at 2 px" in out and "design effect" in out
    assert "(a)" in out and "(b)" in out
    assert main(["compare", str(cube_file), "--metric", "mma@3", "--split", "viewpoint"]) == 2
    assert "--split does not apply to the MMA" in capsys.readouterr().err
