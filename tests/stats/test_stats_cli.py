"""`metricalc compare` run as a user runs it (in-process, ``tests/cli_helpers.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from metricalc import cube as qc
from metricalc.stats import compare
from tests.cli_helpers import CliResult, run_cli


def run(*args: str) -> CliResult:
    return run_cli(*args)


def write_cube(
    path: Path, *, copy: bool = False, keypoints: str = "locked:sift", seed: int = 0
) -> Path:
    """60 queries of 6 scenes (2 pairs each); sift, orb (worse) and optionally a copy of sift."""
    rng = np.random.default_rng(seed)
    n = 60
    scenes = np.repeat(["i_a", "i_b", "v_c", "v_d", "v_e", "v_f"], 10)
    coords = {"scene": scenes, "pair": np.tile(np.repeat(["1-2", "1-3"], 5), 6),
              "keypoint_set": np.full(n, "sift"), "query_keypoint": np.tile(np.arange(5), 12)}
    better = rng.integers(0, 6, size=(2, n))
    better[1] += rng.integers(0, 4, size=n)
    names = ["sift", "orb"]
    if copy:
        better, names = np.vstack([better, better[:1]]), [*names, "copy"]
    ties = np.zeros_like(better)
    cube = qc.new_cube(names, coords, {"better": better, "ties": ties},
                       attrs={**qc.DEFAULT_ATTRS, "keypoints": keypoints})  # fmt: skip
    qc.save(cube, path)
    return path


def test_json_rows_equal_the_library_and_non_finite_values_are_null(tmp_path):
    path = write_cube(tmp_path / "c.nc", copy=True)
    done = run("compare", str(path), "--baseline", "sift", "--test", "randomization",
               "--n-resamples", "500", "--seed", "3", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    expected = compare(qc.open_cube(path), baseline="sift", test="randomization",
                       n_resamples=500, seed=3).to_dataframe().reset_index()  # fmt: skip
    assert [(r["descriptor"], r["baseline"]) for r in rows] == [("orb", "sift"), ("copy", "sift")]
    for row, (_, reference) in zip(rows, expected.iterrows(), strict=True):
        for key, value in reference.items():
            if isinstance(value, float) and not math.isfinite(value):
                assert row[key] is None, key  # the copy: rank-biserial and d_z undefined
            else:
                assert row[key] == pytest.approx(value), key
    assert rows[1]["pvalue"] == 1.0 and rows[1]["rank_biserial"] is None


def test_terminal_table_and_options(tmp_path):
    path = write_cube(tmp_path / "c.nc")
    done = run("compare", str(path), "--metric", "hit@1", "--test", "mcnemar", "--pair-by",
               "query")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sift" in done.stdout and "orb" in done.stdout and "mcnemar test" in done.stdout
    words = " ".join(done.stdout.split())
    assert "independent unit: query" in words
    assert "design effect" in words  # queries of a scene are not independent: said so
    done = run("compare", str(path), "--mean-over", "query")  # pooled mAP, tested by scene
    assert done.returncode == 0, done.stderr
    words = " ".join(done.stdout.split())
    assert "mean over queries; randomization test" in words
    assert "independent unit: scene" in words and "design effect" not in words
    done = run("compare", str(path), "--pair-by", "pair", "--split", "viewpoint",
               "--correction", "bonferroni", "--test", "sign")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "bonferroni correction" in done.stdout and "viewpoint queries only" in done.stdout


@pytest.mark.parametrize(
    ("alias", "metric"),
    [("mAP", "ap"), ("map", "ap"), ("AP", "ap"), ("true_map_micro", "ap"), ("HR@1", "hit@1"),
     ("hit_rate_at_5", "hit@5"), ("hr@3", "hit@3"), ("precision_at_5", "precision@5"),
     ("P@2", "precision@2")],
)
def test_the_tables_names_are_aliases_of_their_variables(tmp_path, alias, metric):
    """--metric takes the table's name of a per-query metric: the same rows as the variable."""
    path = write_cube(tmp_path / "c.nc")
    given = ("--baseline", "sift", "--n-resamples", "200", "--seed", "1", "--json")
    by_alias = run("compare", str(path), "--metric", alias, *given)
    assert by_alias.returncode == 0, by_alias.stderr
    assert json.loads(by_alias.stdout) == json.loads(
        run("compare", str(path), "--metric", metric, *given).stdout
    )


def test_two_cubes_with_labels(tmp_path):
    locked = write_cube(tmp_path / "locked.nc")
    native = write_cube(tmp_path / "native.nc", keypoints="native", seed=1)
    done = run("compare", str(locked), str(native), "--labels", "L,N", "--baseline", "sift (L)",
               "--test", "randomization", "--n-resamples", "200", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    systems = [row["descriptor"] for row in json.loads(done.stdout)]
    assert systems == ["orb (L)", "sift (N)", "orb (N)"]
    default = run("compare", str(locked), str(native), "--test", "ttest", "--pair-by", "scene",
                  "--json")  # fmt: skip
    assert default.returncode == 0, default.stderr
    assert json.loads(default.stdout)[0]["descriptor"] == "sift (locked)"  # labels: file stems


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "mapp"], "metric 'mapp' is not in the cube; available: ap"),
        (["--baseline", "brief"], "baseline 'brief' is not a system"),
        (["--labels", "a,b"], "--labels gives 2 labels for 1 cube files"),
        (["--alpha", "2"], "alpha must be a number strictly between 0 and 1"),
    ],
)
def test_errors_exit_2_without_traceback(tmp_path, args, message):
    path = write_cube(tmp_path / "c.nc")
    done = run("compare", str(path), *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.startswith("metricalc: error:")


def test_missing_file_and_bad_choice(tmp_path):
    done = run("compare", str(tmp_path / "none.nc"))
    assert done.returncode == 2 and "does not exist" in done.stderr
    done = run("compare", str(tmp_path / "none.nc"), "--test", "anova")
    assert done.returncode == 2 and "invalid choice" in done.stderr
