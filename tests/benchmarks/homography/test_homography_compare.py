"""`metricalc compare RUN RUN --metric homography`: the homography columns of `run hpatches`
runs, checked against Glue Factory's AUC on materialised resamples, the runs' own summaries
and a slow enumeration of the within-scene swaps."""

from __future__ import annotations

import itertools
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from metricalc.benchmarks.homography.statistic import (
    COLUMNS,
    homography_records,
    homography_statistic,
)
from metricalc.cli import main
from metricalc.keypoints.homography_errors import error_auc

SCENES = ["v_a", "v_a", "v_b", "v_b", "i_c", "i_c", "i_d", "v_e", "v_e", "i_f"]  # 6 scenes
PAIRS = [f"{scene}/1-{k + 2}" for k, scene in enumerate(SCENES)]


def _table_value(errors: np.ndarray, column: str) -> float:
    """The run summary's cell: Glue Factory's AUC of the errors (mean of three for mAA)."""
    if column.endswith("_mAA"):
        return float(np.mean(error_auc(errors, [1.0, 3.0, 5.0])))
    return float(error_auc(errors, [float(column.split("@")[1][:-2])])[0])


def _pairs(errors: np.ndarray, dlt: np.ndarray, tag: str) -> xr.Dataset:
    return xr.Dataset(
        {"H_error_ransac": ("image_pair", errors), "H_error_dlt": ("image_pair", dlt)},
        coords={"image_pair": PAIRS, "scene": ("image_pair", SCENES)},
        attrs={"tag": tag},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, np.ndarray]]:
    """Two run folders whose results.h5 hold the group 'pairs' of `run hpatches`."""
    root = tmp_path_factory.mktemp("runs")
    rng = np.random.default_rng(4)
    errors = {
        "sift": np.round(rng.exponential(2.0, len(PAIRS)), 1),  # rounded: ties
        "orb": np.round(rng.exponential(3.0, len(PAIRS)), 1),
    }
    errors["orb"][3] = np.inf  # a failed estimate
    paths = []
    for tag, values in errors.items():
        folder = root / tag
        folder.mkdir()
        _pairs(values, values * 2, tag).to_netcdf(
            folder / "results.h5", group="pairs", engine="h5netcdf"
        )
        paths.append(folder)
    return paths, errors


@pytest.mark.parametrize("column", COLUMNS)
def test_weighted_statistic_is_the_auc_of_the_resample(column: str) -> None:
    rng = np.random.default_rng(zlib.crc32(column.encode()))
    values = np.round(rng.exponential(2.5, (2, len(PAIRS))), 1)
    values[1, 2] = np.inf
    records = homography_records(
        {"a": _pairs(values[0], values[0] + 1, "a"), "b": _pairs(values[1], values[1] + 1, "b")}
    )
    statistic = homography_statistic(records, column)
    weights = rng.integers(0, 4, size=(30, len(statistic.clusters))).astype(np.float64)
    weights[0] = 1.0
    variable = "H_error_dlt" if "dlt" in column else "H_error_ransac"
    for system in (0, 1):
        got = statistic.weighted(system, weights)
        for row, w in zip(got, weights, strict=True):
            repeat = w[statistic.unit_clusters].astype(int)
            errors = np.repeat(records[variable].values[system], repeat)
            expected = _table_value(errors, column) if errors.size else np.nan
            assert row == pytest.approx(expected, rel=1e-12, abs=1e-12, nan_ok=True)


def test_compare_equals_the_summaries_and_the_enumeration(
    runs: tuple[list[Path], dict[str, np.ndarray]], capsys: pytest.CaptureFixture[str]
) -> None:
    paths, errors = runs
    capsys.readouterr()
    assert main(["compare", *map(str, paths), "--metric", "homography", "--json"]) == 0
    rows = {row["column"]: row for row in json.loads(capsys.readouterr().out)}
    clusters = sorted(set(SCENES))
    for column in COLUMNS:
        row = rows[column]
        assert (row["descriptor"], row["baseline"], row["n"]) == ("sift", "orb", 6)
        scale = 2.0 if "dlt" in column else 1.0
        a, b = errors["sift"] * scale, errors["orb"] * scale
        estimate = _table_value(a, column) - _table_value(b, column)
        assert row["mean_diff"] == pytest.approx(estimate, rel=1e-12, abs=1e-15)
        extreme = 0
        for swapped in itertools.product([False, True], repeat=len(clusters)):
            moved = np.isin(SCENES, [c for c, s in zip(clusters, swapped, strict=True) if s])
            d = _table_value(np.where(moved, b, a), column) - _table_value(
                np.where(moved, a, b), column
            )
            extreme += abs(d) >= abs(estimate) * (1 - 1e-9) - 1e-12
        assert row["pvalue"] == pytest.approx(extreme / 2 ** len(clusters), rel=1e-12)
        assert row["ci_low"] <= estimate <= row["ci_high"]


def test_one_column_terminal_and_pairs(
    runs: tuple[list[Path], dict[str, np.ndarray]], capsys: pytest.CaptureFixture[str]
) -> None:
    paths, _ = runs
    capsys.readouterr()
    argv = ["compare", *map(str, paths), "--metric", "H_error_ransac@3px", "--pair-by", "pair"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "homography AUC at 3 px (RANSAC)" in out and "independent unit: image pairs" in out
    assert "design effect" in out and "H_error_ransac@1px" not in out


def test_refusals(
    runs: tuple[list[Path], dict[str, np.ndarray]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths, _ = runs
    for extra, message in (
        (["--split", "viewpoint"], "--split does not apply to homography runs"),
        (["--labels", "a,a"], "one distinct label each"),
    ):
        capsys.readouterr()
        assert main(["compare", *map(str, paths), "--metric", "homography", *extra]) == 2
        assert message in capsys.readouterr().err
    assert main(["compare", str(tmp_path), str(paths[0]), "--metric", "homography"]) == 2
    assert "not a run of `metricalc run hpatches`" in capsys.readouterr().err


def test_runs_are_compared_on_the_pairs_all_of_them_have() -> None:
    errors = np.arange(len(PAIRS), dtype=np.float64)
    full = _pairs(errors, errors, "a")
    short = full.isel(image_pair=slice(1, None))  # lacks the first pair
    records = homography_records({"a": full, "b": full, "c": short})
    assert records["pair"].values.tolist() == sorted(PAIRS[1:])
    assert records.attrs["n_pairs_dropped"] == 1  # one pair, whatever the number of runs
