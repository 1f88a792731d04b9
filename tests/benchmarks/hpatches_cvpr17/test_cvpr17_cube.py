"""HPatches CVPR'17 results as cubes: matching and retrieval QueryCubes, verification pair cubes,
and the ``input_order`` tie policy (comparisons over sequences: test_cvpr17_compare.py)."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import xarray as xr

import metricalc as mc
from metricalc import cube as qc
from metricalc.benchmarks.hpatches_cvpr17 import cube as cc
from metricalc.benchmarks.hpatches_cvpr17 import evaluate as ev
from metricalc.benchmarks.hpatches_cvpr17 import files as cf
from metricalc.benchmarks.hpatches_cvpr17 import pairs as cp
from metricalc.cli import main
from metricalc.datasets import make_hpatches17_set
from metricalc.errors import InvalidInputError
from metricalc.report.builder import build
from metricalc.report.study import study_from_dict

LEVELS = ("easy", "hard", "tough")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("hp17cube")
    descriptors = make_hpatches17_set(root, scenes=["camera"], max_patches=120, n_queries=60)
    other = root / "noisy"
    rng = np.random.default_rng(0)
    for path in sorted(descriptors.rglob("*.csv")):
        values = np.loadtxt(path, delimiter=",", ndmin=2)
        target = other / path.relative_to(descriptors)
        target.parent.mkdir(parents=True, exist_ok=True)
        noisy = values + rng.normal(scale=0.05, size=values.shape)
        np.savetxt(target, noisy, delimiter=",", fmt="%.6g")
    return descriptors, other, root / "tasks"


@pytest.fixture(scope="module")
def results(synthetic):
    descriptors, _, tasks = synthetic
    splits = cf.read_splits(tasks)
    done = {}
    for split in sorted(splits):
        result = ev.evaluate_hpatches17(descriptors, split=split, task_dir=tasks, n_pairs=400)
        done[split] = {**result, "test": splits[split]}
    return done


# -------------------------------------------------------------------- the input_order policy
def test_input_order_ranks_only_untied_rank_statistics() -> None:
    b, t = np.array([0, 3, -1]), np.array([0, 0, -1])
    got = mc.ap_from_rank_stats(b, t, tie_policy="input_order")
    np.testing.assert_array_equal(got, mc.ap_from_rank_stats(b, t, tie_policy="optimistic"))
    with pytest.raises(InvalidInputError, match=r"'input_order' .* better=2, ties=1 at index"):
        mc.ap_from_rank_stats(np.array([0, 2]), np.array([0, 1]), tie_policy="input_order")
    with pytest.raises(InvalidInputError, match="ties = 0 or -1"):
        mc.hit_rate_at_k(np.array([2]), np.array([1]), 1, tie_policy="input_order")
    assert "input_order" not in mc.TIE_POLICIES  # not a rank-statistics policy


def test_a_cube_records_input_order_but_not_tied_rank_statistics() -> None:
    coords = {"scene": ["i_a", "i_a"], "pair": ["1-2", "1-3"], "keypoint_set": ["easy"] * 2,
              "query_keypoint": [0, 0]}  # fmt: skip
    attrs = {**qc.DEFAULT_ATTRS, "tie_policy": "input_order"}
    cube = qc.new_cube(["d"], coords, {"ap": [[0.5, 0.25]], "n_relevant": [[1, 1]]}, attrs=attrs)
    assert cube.attrs["tie_policy"] == "input_order"
    tied = {"better": [[0, 1]], "ties": [[0, 2]]}
    with pytest.raises(InvalidInputError, match=r"'input_order' .* better=1, ties=2"):
        qc.new_cube(["d"], coords, tied, attrs=attrs)
    ranked = qc.new_cube(["d"], coords, tied, attrs={**attrs, "tie_policy": "optimistic"})
    with pytest.raises(InvalidInputError, match="ties' must be 0 or -1 under tie policy"):
        qc.validate(ranked.assign_attrs(tie_policy="input_order"))
    with pytest.raises(InvalidInputError, match="tie_policy must be one of"):
        qc.new_cube(["d"], coords, {"ap": [[0.5, 0.25]]}, attrs={**attrs, "tie_policy": "x"})


# -------------------------------------------------------------------- matching and retrieval
def test_matching_cube_means_are_the_printed_maps(results) -> None:
    for split, result in results.items():
        cube = cc.matching_cube(result["units"]["matching"], descriptor="d", split=split)
        printed = result["matching"][split]
        ap = cube.ap.values[0]
        kind = cube.keypoint_set.values.astype(str)
        for level in LEVELS:
            assert ap[kind == level].mean() == pytest.approx(printed[level], abs=1e-12)
        assert ap.mean() == pytest.approx(printed["mean"], abs=1e-12)
        metrics = mc.metric_set(cube)  # the report's metric set reads the cube
        assert float(metrics.true_map_micro[0]) == pytest.approx(printed["mean"], abs=1e-12)
        assert cube.sizes["query"] == len(result["test"]) * 3 * 5
        assert sorted(set(cube.pair.values.tolist())) == [f"1-{k}" for k in range(2, 7)]
        assert {k: cube.attrs[k] for k in ("task", "split", "tie_policy", "ap_method")} == {
            "task": "matching", "split": split, "tie_policy": "input_order",
            "ap_method": "trapezoid",
        }  # fmt: skip
        assert cube.attrs["level"] == "easy,hard,tough"


def test_retrieval_cube_means_are_the_printed_maps(results) -> None:
    for split, result in results.items():
        units = result["units"]
        for pool in (100, 20000):
            cube = cc.retrieval_cube(units["retrieval"], units["retrieval_queries"],
                                     descriptor="d", split=split, pool_size=pool)  # fmt: skip
            printed = result["retrieval"][split]
            kind = cube.keypoint_set.values.astype(str)
            for level in LEVELS:
                got = cube.ap.values[0][kind == level].mean()
                assert got == pytest.approx(printed[level][str(pool)], abs=1e-12)
            assert cube.attrs["task"] == "retrieval" and cube.attrs["pool_size"] == pool


def test_matching_cube_bad_keys() -> None:
    with pytest.raises(InvalidInputError, match="at least one"):
        cc.matching_cube({}, descriptor="d", split="a")
    with pytest.raises(InvalidInputError, match=r"got \('s', 'x', 1\)"):
        cc.matching_cube({("s", "x", 1): 0.5}, descriptor="d", split="a")


# -------------------------------------------------------------------- the data a cube is of
def test_the_synthetic_set_is_named_in_its_folders_and_cubes(synthetic, results, tmp_path) -> None:
    """make_hpatches17_set marks its descriptor and task folders; evaluate_hpatches17 reads the
    mark (of either: a user's own descriptor folder is unmarked) into ``dataset`` and the cubes
    put it before their task; the release (no mark) keeps the dataset attr it always had."""
    descriptors, other, tasks = synthetic
    name = cf.read_dataset_mark(descriptors)
    n = len(cf.read_splits(tasks)["full"])
    assert name.startswith(
        "synthetic-hpatches17 (seed 0, size 320, max_patches 120, n_queries 60, "
        f"n_distractors 1000, {n} sequences "
    ), name
    assert cf.read_dataset_mark(tasks) == name and cf.read_dataset_mark(other) == ""
    assert cf.data_name(other, tasks) == cf.data_name(descriptors) == name
    assert results["full"]["dataset"] == name
    cubes = cc.task_cubes(results["full"], descriptor="d", split="full", pool_size=100)
    assert {task: cube.attrs["dataset"] for task, cube in cubes.items()} == {
        "verification": f"{name}: hpatches-cvpr17 verification, split full",
        "matching": f"{name}: hpatches-cvpr17 matching, split full",
        "retrieval": f"{name}: hpatches-cvpr17 retrieval, split full, pool 100",
    }
    release = cc.task_cubes({**results["full"], "dataset": ""}, descriptor="d", split="full")
    assert [release[t].attrs["dataset"] for t in ("matching", "retrieval")] == [
        "hpatches-cvpr17 matching, split full", "hpatches-cvpr17 retrieval, split full, pool 20000"
    ]  # as before the mark: old files of the release combine with new ones
    with pytest.raises(InvalidInputError, match="cannot combine cubes of different data"):
        qc.combine([release["matching"], cubes["matching"]])
    # the tasks of another generated set, a mark that is not one
    foreign = tmp_path / "tasks"
    shutil.copytree(tasks, foreign)
    cf.write_dataset_mark(foreign, "synthetic-hpatches17 (another)")
    with pytest.raises(InvalidInputError, match=r"holds 'synthetic-hpatches17 \(seed 0.* but the "
                       r"task folder .* holds 'synthetic-hpatches17 \(another\)'"):  # fmt: skip
        ev.evaluate_hpatches17(descriptors, split="full", task_dir=foreign, tasks=["matching"])
    (foreign / cf.DATASET_MARK).write_text('{"name": "x"}')
    with pytest.raises(InvalidInputError, match=r"metricalc_dataset.json: expected \{"):
        cf.data_name(other, foreign)


# -------------------------------------------------------------------- verification pair cubes
def test_pair_cube_recomputes_the_evaluation_exactly(results, tmp_path) -> None:
    for split, result in results.items():
        units = result["units"]
        cube = cp.pair_cube(units["verification"], units["verification_pairs"], descriptor="d",
                            split=split)  # fmt: skip
        assert cp.verification_from_cube(cube) == {"d": result["verification"][split]}
        n_pos = units["verification"]["e"]["pos"].size
        sequences = sorted(set(result["test"]))
        assert cube.sizes == {"descriptor": 1, "level": 3, "pair": 3 * n_pos,
                              "sequence": len(sequences)}  # fmt: skip
        assert int(cube.label.sum()) == n_pos
        # each pair's sequences are those of its two patches in the pair files
        for kind in cp.KINDS:
            rows = cube.kind.values == kind
            s1, s2 = (units["verification_pairs"].pairs[kind][i] for i in (0, 3))
            np.testing.assert_array_equal(cube.sequence.values[cube.first_sequence[rows]], s1)
            np.testing.assert_array_equal(cube.sequence.values[cube.second_sequence[rows]], s2)
        cp.save_pair_cube(cube, tmp_path / f"{split}.nc")
        back = cp.open_pair_cube(tmp_path / f"{split}.nc")
        xr.testing.assert_identical(back, cube)
        assert cp.verification_from_cube(back) == {"d": result["verification"][split]}


def test_pair_cube_errors_are_one_line(results, tmp_path) -> None:
    split, result = next(iter(results.items()))
    units = result["units"]
    cube = cp.pair_cube(units["verification"], units["verification_pairs"], descriptor="d",
                        split=split)  # fmt: skip
    bad = cube.copy(deep=True)
    bad["label"].values[0] = 1
    with pytest.raises(InvalidInputError, match="label must be 1 exactly for kind 'pos'"):
        cp.validate_pair_cube(bad)
    bad = cube.copy(deep=True)
    bad["distance"].values[0, 1, 3] = np.nan
    with pytest.raises(InvalidInputError, match="finite float64"):
        cp.validate_pair_cube(bad)
    bad = cube.copy()
    del bad.attrs["pairs_sha256"]
    with pytest.raises(InvalidInputError, match=r"^pair cube: lacks the attr 'pairs_sha256'"):
        cp.validate_pair_cube(bad)
    with pytest.raises(InvalidInputError, match=r"^pair cube file .*nothing.nc does not exist$"):
        cp.open_pair_cube(tmp_path / "nothing.nc")
    (tmp_path / "text.nc").write_text("no")
    with pytest.raises(InvalidInputError, match=r"text\.nc: not a netCDF-4 file"):
        cp.open_pair_cube(tmp_path / "text.nc")
    # a pair cube given to a QueryCube verb: the error says which verb reads it
    cp.save_pair_cube(cube, tmp_path / "pairs.nc")
    with pytest.raises(InvalidInputError, match=r"^cube file .*pairs\.nc is not a valid QueryCube: "
                       r".*; it is an HPatches CVPR'17 verification pair cube: "
                       r"metricalc compare reads it \(and patches hpatches-compare\)$"):
        qc.open_cube(tmp_path / "pairs.nc")


# ------------------------------------------------- hpatches-benchmark's published average
def _results_py_average(per_pair) -> float:
    """hpatches-benchmark's ``DescriptorMatchingResult.avg`` (python/utils/results.py), step by
    step with loops: per sequence and level the mean AP of its pairs; per level and type (the
    name before "_") the mean over sequences; per type the mean over the levels e, h, t (NaN
    when one is empty); the mean of the types i and v, times 100 there, a fraction here."""
    by_sequence = {}
    for (sequence, level, _k), ap in per_pair.items():
        by_sequence.setdefault((level, sequence.split("_")[0], sequence), []).append(ap)
    cells = {}
    for (level, kind, _sequence), aps in by_sequence.items():
        cells.setdefault((level, kind), []).append(sum(aps) / len(aps))
    average = {}
    for kind in "iv":
        values = [cells.get((level, kind)) for level in "eht"]
        average[kind] = (float("nan") if None in values
                         else sum(sum(v) / len(v) for v in values) / 3)  # fmt: skip
    return (average["i"] + average["v"]) / 2


@pytest.mark.parametrize("seed", range(12))
def test_the_matching_map_is_hpatches_benchmarks_average(seed) -> None:
    """``hpatches17_matching_map`` (the name of the published numbers) is results.py's ``avg``:
    the types weigh the same whatever their numbers of sequences, unlike the unit mean."""
    from metricalc.metrics import metric_set

    rng = np.random.default_rng(seed)
    n_i, n_v = rng.integers(1, 6, size=2)
    sequences = [f"i_s{j}" for j in range(n_i)] + [f"v_s{j}" for j in range(n_v)]
    per_pair = {(s, level, k): float(rng.random()) for s in sequences for level in "eht"
                for k in range(1, 6)}  # fmt: skip
    if seed % 3 == 0:  # a sequence without some pairs: its own mean first, as the reference
        per_pair = {key: v for key, v in per_pair.items() if not (key[0] == "v_s0" and key[2] > 3)}
    cube = cc.matching_cube(per_pair, descriptor="d", split="full")
    got = float(metric_set(cube).hpatches17_matching_map.sel(descriptor="d"))
    assert got == pytest.approx(_results_py_average(per_pair), abs=1e-12)
    if n_i != n_v:  # the types weigh the same; in the mean over units they do not
        assert got != pytest.approx(float(cube.ap.mean()), abs=1e-9)
    empty = cube.isel(query=slice(0, 0))  # no unit at all (every descriptor failed): NaN
    assert np.isnan(float(metric_set(empty).hpatches17_matching_map.sel(descriptor="d")))
    only_view = {key: v for key, v in per_pair.items() if key[0].startswith("v_")}
    cube = cc.matching_cube(only_view, descriptor="d", split="view")
    assert np.isnan(float(metric_set(cube).hpatches17_matching_map.sel(descriptor="d")))


# -------------------------------------------------------------------- the CLI end to end
def test_cli_writes_every_task_cube_and_they_compare(synthetic, tmp_path, capsys) -> None:
    descriptors, other, tasks = synthetic
    prefixes, printed_mean = [], []
    for folder in (descriptors, other):
        prefix = tmp_path / "out" / folder.name
        argv = ["patches", "hpatches-eval", str(folder), "--tasks", str(tasks), "--split",
                "full", "--pairs", "300", "--out", f"{prefix}.nc", "--json"]  # fmt: skip
        assert main(argv) == 0
        printed = json.loads(capsys.readouterr().out)
        prefixes.append(prefix)
        printed_mean.append(printed["matching"]["full"]["mean"])
        matching = qc.open_cube(f"{prefix}.matching.nc")
        assert float(matching.ap.mean()) == pytest.approx(
            printed["matching"]["full"]["mean"], abs=1e-12
        )
        pairs = cp.open_pair_cube(f"{prefix}.verification.nc")
        assert cp.verification_from_cube(pairs)[folder.name] == printed["verification"]["full"]
        assert qc.open_cube(f"{prefix}.retrieval.nc").attrs["task"] == "retrieval"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{f.name}.{t}.nc" for f in (descriptors, other) for t in ev.TASKS17
    )
    a, b = (f"{p}.matching.nc" for p in prefixes)
    assert main(["compare", a, b, "--n-resamples", "200"]) == 2  # 2 sequences: too few
    assert "2 paired units (pair_by='scene'" in capsys.readouterr().err
    assert main(["compare", a, b, "--n-resamples", "200", "--pair-by", "query"]) == 0
    assert "noisy" in capsys.readouterr().out
    assert main(["compare", a, b, "--n-resamples", "200", "--pair-by", "pair", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["n"] == 5 * len(cf.read_splits(tasks)["full"])  # image pairs, levels averaged
    # 2 sequences: too few to test over sequences; the pooled mAP tested over image pairs
    study = study_from_dict({"data": {"dataset": "synthetic"}, "metrics": ["true_map_micro"],
                             "tests": {"n_resamples": 199, "pair_by": "query"}},
                            source=tmp_path / "s.yaml")  # fmt: skip
    both = qc.combine([qc.open_cube(a), qc.open_cube(b)])
    report = build(study, cubes={"": both}, out=tmp_path / "report")
    got = report.metrics.true_map_micro.sel(descriptor=descriptors.name)
    assert float(got) == pytest.approx(float(qc.open_cube(a).ap.mean()), abs=1e-12)
    # the sentences count the cubes' units (an image pair at a level), never "queries"
    assert report.sentences and not any("queries" in s for s in report.sentences)
    assert any("paired units, one per image pair and level" in s for s in report.sentences)
    assert report.rankings == []  # two systems: no ranking
    # the protocol list is the CVPR'17 one, without the keypoint defaults every cube holds
    page = (tmp_path / "report" / "report.html").read_text()
    listed = re.findall(r'<th scope="row">([^<]+)</th>', page[page.index('id="protocol"') :])
    assert listed == ["dataset", "task", "split", "level", "distance", "tie_policy", "ap_method"]
    assert both.attrs["tau_px"] == 3.0  # still in the cube (validate, combine), not listed
    assert "independent unit: image pair and level (coarser" in page
    # the published matching mAPs (of the HPatches release) are refused beside cubes of the
    # synthetic set: the data is named in the cubes' dataset attr
    raw = {"data": {"dataset": "synthetic"}, "metrics": ["hpatches17_matching_map"],
           "tests": {"n_resamples": 199, "rank": False}, "outputs": ["markdown"],
           "reported": ["hpatches-cvpr17/sift/hpatches17_matching_map"]}  # fmt: skip
    assert both.attrs["dataset"].startswith("synthetic-hpatches17 (seed 0, size 320, ")
    assert both.attrs["dataset"].endswith(": hpatches-cvpr17 matching, split full")
    with pytest.raises(InvalidInputError, match=r"matching_map was measured on HPatches patches; "
                       r"the study's cubes were computed on generated data \('synthetic-hpat"):
        build(study_from_dict(raw, source=tmp_path / "r.yaml"), cubes={"": both},
              out=tmp_path / "refused")  # fmt: skip
    assert not (tmp_path / "refused").exists()
    # beside cubes of the release (no mark: the dataset attr as ever), same split only
    both.attrs["dataset"] = "hpatches-cvpr17 matching, split full"
    report = build(study_from_dict(raw, source=tmp_path / "r.yaml"), cubes={"": both},
                   out=tmp_path / "reported")  # fmt: skip
    measured = report.metrics.hpatches17_matching_map.sel(descriptor=descriptors.name)
    units = qc.open_cube(a)
    per_pair = {(str(s), level[0], int(p[2:]) - 1): float(v) for s, level, p, v in
                zip(units.scene.values, units.keypoint_set.values, units.pair.values,
                    units.ap.values[0], strict=True)}  # fmt: skip
    assert float(measured) == pytest.approx(_results_py_average(per_pair), abs=1e-12)
    # as many i_ as v_ sequences here: the same as the unit mean hpatches-eval prints
    assert float(measured) == pytest.approx(printed_mean[0], abs=1e-12)
    last = (tmp_path / "reported" / "tables.md").read_text().splitlines()[-1]
    assert last.startswith("| *SIFT (reported)* | *25.5*"), last
    both.attrs["split"] = "a"
    with pytest.raises(InvalidInputError, match="split 'full'; the study's cubes hold split 'a'"):
        build(study_from_dict(raw, source=tmp_path / "r.yaml"), cubes={"": both},
              out=tmp_path / "reported_a")  # fmt: skip
    a, b = (f"{p}.verification.nc" for p in prefixes)
    # two sequences: the values, and one line saying why there is no test
    assert main(["patches", "hpatches-compare", a, b, "--json"]) == 0
    captured = capsys.readouterr()
    done = json.loads(captured.out)
    name = str(cp.open_pair_cube(a).descriptor.values[0])
    evaluated = cp.verification_from_cube(cp.open_pair_cube(a))[name]["easy"]["imbalanced"]
    assert done["values"][name]["easy imbalanced inter"] == pytest.approx(evaluated["inter"])
    assert captured.err == (f"metricalc: {done['note']}\n")
    assert done["note"].startswith("not tested: the pairs lie in 2 sequences")
    assert main(["compare", a, b]) == 0  # the same through metricalc compare
    captured = capsys.readouterr()
    assert "mean imbalanced" in captured.out and captured.err.count("\n") == 1


def test_cli_compare_names_and_errors(synthetic, tmp_path, capsys) -> None:
    descriptors, _, tasks = synthetic
    base = ["patches", "hpatches-eval", str(descriptors), "--tasks", str(tasks), "--split",
            "full", "--json"]  # fmt: skip
    assert main([*base, "--pairs", "200", "--out", str(tmp_path / "x")]) == 0
    assert main([*base, "--task", "verification", "--pairs", "250", "--out",
                 str(tmp_path / "y")]) == 0  # fmt: skip
    capsys.readouterr()
    x, y = tmp_path / "x.verification.nc", tmp_path / "y.verification.nc"
    z = tmp_path / "z.verification.nc"
    z.write_bytes(x.read_bytes())  # the same descriptor name in two files: named by file
    cases = [
        ([str(x), str(z), "--descriptors", "raw,other"], "descriptor 'raw': expected one of"),
        ([str(x), str(tmp_path / "x.matching.nc")], "not a pair cube"),
        ([str(x), str(tmp_path / "none.nc")], "none.nc does not exist"),
        ([str(x), str(z), "--n-resamples", "0"], "n_resamples must be an integer >= 1"),
        # the same file twice: one descriptor, nothing to compare (was a traceback)
        ([str(x), str(x), "--n-resamples", "9"], f"{x} is given twice"),
        ([str(x), str(y)], "different verification pairs"),
    ]
    for argv, message in cases:
        assert main(["patches", "hpatches-compare", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert main(["compare", str(x), str(tmp_path / "x.matching.nc")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "compared only with other pair cubes" in err
    assert main(["patches", "hpatches-compare", str(x), str(z), "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["values"]) == [
        "raw (x.verification.nc)", "raw (z.verification.nc)"]
    (tmp_path / "again").mkdir()  # and the same file name in two folders: named by path
    w = tmp_path / "again" / "x.verification.nc"
    w.write_bytes(x.read_bytes())
    assert main(["patches", "hpatches-compare", str(x), str(w), "--json"]) == 0
    named = sorted(json.loads(capsys.readouterr().out)["values"])
    assert named == sorted([f"raw ({x})", f"raw ({w})"])
    folder = tmp_path / "folder"
    folder.mkdir()
    assert main([*base, "--task", "matching", "--out", str(folder), "--name", "mine"]) == 0
    assert [p.name for p in folder.iterdir()] == ["mine.matching.nc"]


def test_task_cubes_are_written_all_or_none(results, tmp_path, monkeypatch) -> None:
    split, result = next(iter(results.items()))
    cubes = cc.task_cubes(result, descriptor="d", split=split)
    assert sorted(cubes) == sorted(ev.TASKS17)
    paths = cc.save_task_cubes(cubes, tmp_path / "run.nc")
    before = {task: path.read_bytes() for task, path in paths.items()}

    def full_disk(cube, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cc.qc, "save", full_disk)  # matching and retrieval fail after verification
    changed = {**cubes, "verification": cubes["verification"].assign_attrs(split="other")}
    with pytest.raises(OSError, match="No space left"):
        cc.save_task_cubes(changed, tmp_path / "run.nc")
    assert {task: path.read_bytes() for task, path in paths.items()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths.values())


def _unit_keys(per_type: int) -> list[tuple[str, str, int]]:
    """The (sequence, level, k) keys of ``per_type`` i_ and v_ sequences, every level and pair."""
    return [(f"{kind}_s{i}", level, k) for kind in "iv" for i in range(per_type)
            for level in "eht" for k in range(1, 6)]  # fmt: skip


def _caption(labelled, tmp_path) -> str:
    """The caption of the table of a markdown study over the labelled matching cubes."""
    raw = {"data": {"dataset": "synthetic"}, "metrics": ["hpatches17_matching_map"],
           "tests": {"n_resamples": 99, "rank": False}, "outputs": ["markdown"]}  # fmt: skip
    build(study_from_dict(raw, source=tmp_path / "s.yaml"), cubes=labelled, out=tmp_path / "r")
    return (tmp_path / "r" / "tables.md").read_text().splitlines()[0]


def test_a_study_of_two_matching_cubes_is_captioned_with_their_protocol_once(tmp_path) -> None:
    """Two labelled matching cubes: the caption names the CVPR'17 protocol (task, split, ...)
    once, and neither the keypoint protocol (tau, border, keypoints) nor a doubled dataset."""
    rng = np.random.default_rng(5)
    keys = _unit_keys(4)
    labelled = {}
    for label, shift in (("a", 0.1), ("b", 0.0)):
        per_pair = {key: float(np.clip(rng.random() * 0.8 + shift, 0, 1)) for key in keys}
        labelled[label] = cc.matching_cube(per_pair, descriptor="d", split="full")
    caption = _caption(labelled, tmp_path)
    assert caption.startswith(
        "Table: Results on the HPatches CVPR'17 benchmark. Protocol: task matching, split full, "
        "distance l2, tie policy input\\_order, AP method trapezoid. Values in percent"
    ), caption
    assert caption.count("split full") == 1 and caption.count("matching") == 1
    assert not any(word in caption for word in ("tau", "border", "keypoints"))
    assert "paired by sequence," in caption  # its independent units, not "scene"


def test_the_caption_of_synthetic_matching_cubes_names_the_data(tmp_path) -> None:
    """Cubes of the synthetic set (make_hpatches17_set's mark) are not captioned as results on
    the HPatches benchmark."""
    keys = _unit_keys(2)
    name = "synthetic-hpatches17 (seed 0)"
    labelled = {
        label: cc.matching_cube({key: ap for key in keys}, descriptor="d", split="full", data=name)
        for label, ap in (("a", 0.5), ("b", 0.4))
    }
    caption = _caption(labelled, tmp_path)
    assert caption.startswith(
        "Table: Results on a synthetic set in the layout of the HPatches CVPR'17 benchmark. "
    ), caption


def test_a_study_of_matching_cubes_counts_their_units_in_its_sentences(tmp_path) -> None:
    """The sentences and the ranking paragraph of a study over CVPR'17 matching cubes count
    image pairs at a level (pair_by query) and sequences (the ranking's blocks), never
    "queries" or "scenes"; the HTML page names its tests' units the same way."""
    rng = np.random.default_rng(7)
    keys = _unit_keys(4)
    labelled = {}
    for label, shift in (("a", 0.2), ("b", 0.1), ("c", 0.0)):
        per_pair = {key: float(np.clip(rng.random() * 0.7 + shift, 0, 1)) for key in keys}
        labelled[label] = cc.matching_cube(per_pair, descriptor="d", split="full")
    raw = {"data": {"dataset": "synthetic"}, "metrics": ["hpatches17_matching_map"],
           "tests": {"n_resamples": 99}, "outputs": ["summary", "html"]}  # fmt: skip
    report = build(study_from_dict(raw, source=tmp_path / "s.yaml"), cubes=labelled,
                   out=tmp_path / "r")  # fmt: skip
    assert len(report.sentences) == 3
    sequences = len({key[0] for key in keys})
    assert all(s.endswith(f"; {sequences} paired units, one per sequence).")
               for s in report.sentences), report.sentences  # fmt: skip
    (ranking,) = report.rankings
    assert "Friedman test over 8 paired units (one per sequence) and 3 systems" in ranking
    text = (tmp_path / "r" / "summary.txt").read_text().split("Notes:")[0]  # the sentences
    assert not any(word in text for word in ("quer", "scenes")), text
    page = (tmp_path / "r" / "report.html").read_text()
    assert "statistic, independent unit: sequence (coarser where a column needs it)" in page
    assert "Friedman ranks over sequences" in page


def test_hit_rates_of_a_matching_cube_are_refused_with_the_reason() -> None:
    from metricalc.stats import unit_values

    keys = _unit_keys(2)
    cube = cc.matching_cube({key: 0.5 for key in keys}, descriptor="d", split="full")
    with pytest.raises(InvalidInputError, match=r"needs the rank statistics better/ties, and this "
                       r"cube has none \(the cubes of the HPatches patch tasks hold AP only\)"):
        unit_values(cube, metric="hit@1")
