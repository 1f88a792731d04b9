"""Results folders as one QueryCube (contract A): hand-computed APs, layout, errors, round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

import metricalc as mc
from metricalc import cube as qc
from metricalc.benchmarks.hpatches_patches import evaluate_files, write_results
from metricalc.benchmarks.hpatches_patches.querycube import evaluate_folders
from metricalc.errors import InvalidInputError
from tests.cli_helpers import CliResult, run_cli

POOL = ("i_a.ref", "i_a.e1", "i_a.e2", "v_b.ref", "v_b.e1")
QUERIES = ("i_a.ref.0", "v_b.ref.1")
CLUSTERS = ("i_a.ref.0,i_a.e1.0,i_a.e2.0", "v_b.ref.1,v_b.e1.1")
SECOND = ("v_b.ref.4",)  # a second benchmark file, one query
SECOND_CLUSTERS = ("v_b.ref.4,v_b.e1.4",)


def padded(head: list[str], filler: str) -> list[str]:
    """51 results: ``head``, then distinct patches of ``filler`` (relevant to nothing)."""
    return [*head, *(f"{filler}.{100 + k}" for k in range(51 - len(head)))]


# Per query: results of descriptor "mine", hand-computed patch AP and image AP (vlfeat).
MINE = [
    # patch matches at j = 1, 4; image matches at j = 1, 3, 4 (i_a.e2.7: a cluster image)
    (padded(["i_a.ref.0", "i_a.e1.0", "v_b.ref.5", "i_a.e2.7", "i_a.e2.0"], "v_b.e1"),
     (1 + 2 / 4) / 2, (1 + 2 / 3 + 3 / 4) / 3),
    # patch match at j = 2 only; image: j = 2 (v_b.e1.1) and j = 3 (v_b.ref.9, its own image)
    (padded(["v_b.ref.1", "i_a.ref.3", "v_b.e1.1", "v_b.ref.9"], "i_a.e2"),
     1 / 2, (1 / 2 + 2 / 3) / 2),
]  # fmt: skip
SECOND_MINE = (padded(["v_b.ref.4", "i_a.ref.1"], "i_a.e1"), 0.0, 0.0)  # nothing relevant


def oracle(query: str, cluster: str) -> list[str]:
    members = cluster.split(",")
    image = members[1].rsplit(".", 1)[0]
    return [query, *members[1:], *(f"{image}.{200 + k}" for k in range(51 - len(members)))]


@pytest.fixture
def folders(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    for name, queries, clusters in (("train_easy_2s_00", QUERIES, CLUSTERS),
                                    ("test_hard_1s_00", SECOND, SECOND_CLUSTERS)):  # fmt: skip
        (bench / f"{name}.benchmark").write_text("\n".join([",".join(POOL), *queries]) + "\n")
        (bench / f"{name}.labels").write_text("\n".join([",".join(POOL), *clusters]) + "\n")
    mine, perfect = tmp_path / "mine", tmp_path / "perfect"
    mine.mkdir(), perfect.mkdir()
    write_results(mine / "train_easy_2s_00.results", POOL, [row for row, _, _ in MINE])
    write_results(mine / "test_hard_1s_00.results", POOL, [SECOND_MINE[0]])
    write_results(perfect / "train_easy_2s_00.results", POOL,
                  [oracle(q, c) for q, c in zip(QUERIES, CLUSTERS, strict=True)])  # fmt: skip
    return bench, mine, perfect


def test_cube_layout_and_hand_computed_values(folders):
    bench, mine, perfect = folders
    done = evaluate_folders(bench, [mine, perfect])
    cube = qc.validate(done.cube)
    assert cube.descriptor.values.tolist() == ["mine", "perfect"]
    # Contract A coordinates: scene, split from prefix, pair "", keypoint_set = file stem,
    # query_keypoint = index in the file.
    names = ["scene", "split", "pair", "keypoint_set", "query_keypoint"]
    rows = sorted(zip(*(cube[name].values.tolist() for name in names), strict=True))
    assert rows == [
        ("i_a", "illumination", "", "train_easy_2s_00", 0),
        ("v_b", "viewpoint", "", "test_hard_1s_00", 0),
        ("v_b", "viewpoint", "", "train_easy_2s_00", 1),
    ]
    expected = {
        ("train_easy_2s_00", 0): MINE[0][1:],
        ("train_easy_2s_00", 1): MINE[1][1:],
        ("test_hard_1s_00", 0): SECOND_MINE[1:],
    }
    for j in range(cube.sizes["query"]):
        key = (str(cube.keypoint_set.values[j]), int(cube.query_keypoint.values[j]))
        mine_row = cube.isel(query=j).sel(descriptor="mine")
        assert float(mine_row.ap) == pytest.approx(expected[key][0], abs=1e-12)
        assert float(mine_row.image_ap) == pytest.approx(expected[key][1], abs=1e-12)
        assert int(mine_row.n_relevant) == 1
        assert int(mine_row.better) == -1 and int(mine_row.ties) == -1
        perfect_row = cube.isel(query=j).sel(descriptor="perfect")
        if key[0] == "train_easy_2s_00":  # the oracle scores 1 in both tasks
            assert float(perfect_row.ap) == 1.0 and float(perfect_row.image_ap) == 1.0
        else:  # no perfect/test_hard_1s_00.results: missing, not zero
            assert int(perfect_row.n_relevant) == -1 and np.isnan(float(perfect_row.image_ap))
    assert cube.image_ap.dtype == np.float64 and cube.image_ap.dims == ("descriptor", "query")
    assert cube.attrs["ap_method"] == "vlfeat" and cube.attrs["dataset"] == "bench"
    assert cube.attrs["benchmark"] == "hpatches-retrieval"
    for name in qc.PROTOCOL_ATTRS:
        if name not in ("ap_method", "dataset"):
            assert cube.attrs[name] == qc.DEFAULT_ATTRS[name]
    assert cube.status.values.tolist() == ["ok", "ok"]
    # Per-file maps agree with evaluate_files and with the cube.
    direct = evaluate_files(bench / "train_easy_2s_00.benchmark",
                            bench / "train_easy_2s_00.labels", mine / "train_easy_2s_00.results")
    files = done.files.set_index(["descriptor", "file"])
    assert files.loc[("mine", "train_easy_2s_00"), "patch_retrieval_map"] == pytest.approx(
        float(direct.patch_retrieval_map)
    )
    assert float(direct.patch_retrieval_map) == pytest.approx((0.75 + 0.5) / 2)
    groups = done.groups().set_index(["descriptor", "group"])
    assert groups.loc[("mine", "split=test"), "files"] == 1
    assert groups.loc[("perfect", "difficulty=easy"), "image_retrieval_map"] == 1.0


def test_metric_set_and_round_trip(folders, tmp_path):
    bench, mine, perfect = folders
    cube = evaluate_folders(bench, [mine, perfect]).cube
    qc.save(cube, tmp_path / "cube.nc")
    reopened = qc.open_cube(tmp_path / "cube.nc")
    np.testing.assert_array_equal(reopened.image_ap.values, cube.image_ap.values)
    assert reopened.attrs["benchmark"] == "hpatches-retrieval"
    metrics = mc.metric_set(reopened)
    micro = (MINE[0][1] + MINE[1][1] + SECOND_MINE[1]) / 3
    assert float(metrics.true_map_micro.sel(descriptor="mine")) == pytest.approx(micro)
    assert float(metrics.true_map_micro.sel(descriptor="perfect")) == 1.0


def test_a_broken_file_marks_the_descriptor_and_keeps_its_good_queries(folders):
    bench, mine, perfect = folders
    (mine / "test_hard_1s_00.results").write_text("v_b.ref\nv_b.ref.4\n")
    done = evaluate_folders(bench, [mine, perfect])
    cube = done.cube
    status = dict(zip(cube.descriptor.values, cube.status.values, strict=True))
    assert status == {"mine": "error", "perfect": "ok"}
    message = str(cube.error.sel(descriptor="mine").values)
    assert "test_hard_1s_00.results, line 1: expected the pool" in message
    assert int((cube.n_relevant.sel(descriptor="mine") == 1).sum()) == 2
    assert [(d, p.name) for d, p, _ in done.errors] == [("mine", "test_hard_1s_00.results")]
    # No good file at all: an error record.
    for path in mine.iterdir():
        path.write_text("broken\n")
    cube = evaluate_folders(bench, [mine, perfect]).cube
    assert str(cube.status.sel(descriptor="mine").values) == "error"
    assert int((cube.n_relevant.sel(descriptor="mine") == 1).sum()) == 0


def test_folder_names_are_descriptors(folders, tmp_path):
    bench, mine, _ = folders
    twin = tmp_path / "elsewhere" / "mine"
    twin.mkdir(parents=True)
    with pytest.raises(InvalidInputError, match="have the same name 'mine'"):
        evaluate_folders(bench, [mine, twin])
    with pytest.raises(InvalidInputError, match=r"holds no \.results files"):
        evaluate_folders(bench, [twin])
    with pytest.raises(InvalidInputError, match="expected at least one results folder"):
        evaluate_folders(bench, [])


def test_a_linked_folder_is_named_as_given(folders, tmp_path, monkeypatch):
    """The descriptor is the folder name the user gives, also when it is a symbolic link to a
    folder named otherwise (``results/sift -> runs/2024-05-01``); "." and "sift/" name the
    folder they are."""
    bench, mine, _ = folders
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "sift").symlink_to(mine, target_is_directory=True)
    (tmp_path / "links" / "bench_v1").symlink_to(bench, target_is_directory=True)
    done = evaluate_folders(tmp_path / "links" / "bench_v1", [tmp_path / "links" / "sift"])
    assert done.cube.descriptor.values.tolist() == ["sift"]
    assert done.files["descriptor"].tolist() == ["sift", "sift"]
    assert done.cube.attrs["dataset"] == "bench_v1"
    monkeypatch.chdir(mine)
    assert evaluate_folders(bench, ["."]).cube.descriptor.values.tolist() == ["mine"]
    monkeypatch.chdir(tmp_path / "links")
    assert evaluate_folders(bench, ["sift/"]).cube.descriptor.values.tolist() == ["sift"]


def run(*args: str) -> CliResult:
    return run_cli(*args)


def test_cli_writes_the_cube_and_json_and_exits_nonzero_on_a_broken_file(folders, tmp_path):
    bench, mine, perfect = folders
    out = tmp_path / "cube.nc"
    result = run("patches", "eval", "--benchmarks", str(bench), "--results", str(mine),
                 str(perfect), "--out", str(out), "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert {(r["descriptor"], r["file"]) for r in payload["files"]} == {
        ("mine", "test_hard_1s_00"), ("mine", "train_easy_2s_00"), ("perfect", "train_easy_2s_00")
    }  # fmt: skip
    assert payload["cube"] == str(out) and payload["errors"] == []
    assert qc.open_cube(out).descriptor.values.tolist() == ["mine", "perfect"]
    (perfect / "test_hard_1s_00.results").write_text("i_a.ref\n")
    result = run("patches", "eval", "--benchmarks", str(bench), "--results", str(mine),
                 str(perfect))  # fmt: skip
    assert result.returncode == 1
    assert "perfect/test_hard_1s_00.results" in result.stderr and "Traceback" not in result.stderr
    assert "train_easy_2s_00" in result.stdout  # the good files are still reported
    for args, message in [
        (["--benchmarks", str(bench), "--results", str(mine), "--out", str(tmp_path)],
         "is a directory; expected a cube file path"),
        (["--benchmark", str(bench / "train_easy_2s_00.benchmark"), "--labels",
          str(bench / "train_easy_2s_00.labels"), "--results", str(mine), str(perfect)],
         "with one .results file"),
    ]:  # fmt: skip
        result = run("patches", "eval", *args)
        assert result.returncode == 2 and message in result.stderr, result.stderr
