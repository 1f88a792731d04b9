"""The ``metricalc`` command: in-process (``tests/cli_helpers.run_cli``), and as a user runs it,
in a subprocess, for ``--version``, the console script, the parser's imports and the quick demo."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import metricalc
from metricalc.fileio import current_umask
from tests.cli_helpers import run_cli as run
from tests.data_files import HPATCHES_RETRIEVAL


def run_process(
    *args: str, executable: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``metricalc *args`` in a new interpreter (or ``executable``), as a user runs it."""
    command = executable or [sys.executable, "-m", "metricalc"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


def console_script() -> list[str]:
    """The installed ``metricalc`` entry point next to this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("metricalc")
    found = str(beside) if beside.exists() else shutil.which("metricalc")
    if found is None:
        pytest.skip("the metricalc console script is not installed")
    return [found]


def test_version_matches_package_metadata():
    result = run_process("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"metricalc {metricalc.__version__}"
    assert metricalc.__version__ != "0+unknown"


def test_help_lists_the_verbs():
    result = run("--help")
    assert result.returncode == 0
    assert "usage: metricalc" in result.stdout
    assert "demo" in result.stdout


HEAVY = ("metricalc.experiment", "metricalc.stats", "dask", "matplotlib", "statsmodels", "cv2",
         "scipy.stats", "seaborn", "h5py", "omegaconf", "jinja2", "rich")  # fmt: skip


def test_building_the_parser_imports_no_heavy_module():
    """``metricalc --help`` / ``--version`` start fast: the parser needs none of these."""
    code = (
        "import sys, json; from metricalc.cli import build_parser; build_parser().format_help(); "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_parser_choices_agree_with_the_library():
    """The values the light parser spells out are the library's."""
    import importlib

    from metricalc import cube, stats
    from metricalc.benchmarks.hpatches_sequences import cli as keypoints
    from metricalc.cli import compare, experiments

    runs = importlib.import_module("metricalc.experiment.run")
    assert tuple(sorted(runs.BENCHMARKS)) == experiments.BENCHMARK_NAMES
    assert experiments.DEFAULT_OUTPUTS == runs.DEFAULT_OUTPUTS
    for name in ("TESTS", "PAIR_BY", "SPLITS", "CORRECTIONS", "INTERVALS"):
        assert getattr(compare, name) == getattr(stats, name), name
    assert keypoints.Y0_POLICIES == cube.Y0_POLICIES


def test_console_script_runs():
    result = run_process("--version", executable=console_script())
    assert result.returncode == 0
    assert result.stdout.startswith("metricalc ")


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """``python -m metricalc demo --quick --image-retrieval`` run once, in a fresh folder: the
    folder and the process result. Neither cube is there before (so the demo computes both)."""
    out = tmp_path_factory.mktemp("demo")
    assert not any(out.iterdir())
    result = run_process(
        "demo", "--quick", "--out", str(out), "--no-progress", "--image-retrieval"
    )
    return out, result


def test_quick_demo_writes_cubes_metrics_and_figures(quick_demo):
    from metricalc.keypoints.detectors import available_methods
    from metricalc.report.study import DEMO_LOCKED, DEMO_NATIVE

    tmp_path, result = quick_demo
    methods = {
        "locked": list(DEMO_LOCKED),
        "native": [m for m in DEMO_NATIVE if m in available_methods()],
    }
    assert result.returncode == 0, result.stderr
    assert "locked keypoints" in result.stdout and "native keypoints" in result.stdout
    for mode in ("locked", "native"):
        cube = metricalc.cube.open_cube(tmp_path / f"cube_{mode}.nc")
        assert cube.descriptor.values.tolist() == methods[mode]
        metrics = json.loads((tmp_path / f"metrics_{mode}.json").read_text())
        assert 0 < metrics["sift"]["true_map_micro"] <= 1
        assert (tmp_path / f"metrics_{mode}.csv").exists()
        for figure in ("map_by_split", "rank_histogram", "scene_map"):
            assert (tmp_path / "figures" / f"{mode}_{figure}.png").stat().st_size > 0
            assert (tmp_path / "figures" / f"{mode}_{figure}.svg").exists()
    # --image-retrieval: the locked cube (the report's) has DescriptorWorkbench's image retrieval
    locked = json.loads((tmp_path / "metrics_locked.json").read_text())
    assert 0 < locked["sift"]["image_retrieval_map"] <= 1
    report = tmp_path / "report" / "report.html"
    assert f"report: {report}" in result.stdout
    assert "data:image/png;base64," in report.read_text()
    tables = (tmp_path / "report" / "tables.tex").read_text()
    assert tables.count(r"\begin{tabular}") == 1
    # the paper table as it comes out: the data called synthetic under the study's own title,
    # every header defined in the caption, no column twice, the overall mAP (a mean over scenes,
    # as the split mAPs) between the two split values
    caption = tables.split(r"\caption{", 1)[1].split("}\n", 1)[0]
    assert caption.startswith("Built-in descriptors on the built-in benchmark. Data: metricalc's")
    assert "synthetic" in caption.split(".")[1]
    headers = tables.split(r"\midrule", 1)[0].splitlines()[-1].rstrip(" \\").split(" & ")[1:]
    assert headers[:3] == ["mAP", "mAP v", "mAP i"] and "retr. AP" not in headers
    assert all(f"{h} is the " in caption for h in headers), headers
    table = pd.read_csv(tmp_path / "report" / "table.csv")
    lo, hi = np.minimum(table.viewpoint_map, table.illumination_map), np.maximum(
        table.viewpoint_map, table.illumination_map
    )
    assert ((lo <= table.true_map_macro_by_scene) & (table.true_map_macro_by_scene <= hi)).all()
    # every file is readable by others as the umask allows (not mkstemp's 0600)
    umask = current_umask()
    modes = {p.relative_to(tmp_path): stat.S_IMODE(p.stat().st_mode) for p in tmp_path.rglob("*")
             if p.is_file()}  # fmt: skip
    assert modes and all(mode == 0o666 & ~umask for mode in modes.values()), modes
    # the cubes record their data as `keypoints eval` does, and their cache key
    locked = metricalc.cube.open_cube(tmp_path / "cube_locked.nc")
    assert locked.attrs["dataset"].startswith("synthetic-sequences sha256:")  # generated data
    assert locked.attrs["dataset_path"] == str(tmp_path / "benchmark")
    assert len(locked.attrs["cache_key"]) == 24
    assert f"systems &middot; dataset {tmp_path / 'benchmark'}</p>" in report.read_text()


def test_the_quick_demo_cube_is_too_small_to_test_over_scenes_and_says_so(quick_demo, capsys):
    """README's `compare reports/demo/cube_locked.nc` on the quick demo's 4 scenes: a clear
    refusal (a test over scenes needs 5), and the image pairs on request, design effect shown."""
    from metricalc.cli import main

    tmp_path, _ = quick_demo
    cube = str(tmp_path / "cube_locked.nc")
    assert main(["compare", cube, "--baseline", "sift", "--n-resamples", "200"]) == 2
    assert "4 paired units (pair_by='scene'" in capsys.readouterr().err
    assert main(["compare", cube, "--baseline", "sift", "--n-resamples", "200", "--pair-by",
                 "pair"]) == 0  # fmt: skip
    assert "design effect" in " ".join(capsys.readouterr().out.split())


def test_quick_demo_cubes_equal_separate_evaluations(quick_demo):
    """The demo shares work between its two runs (one detection and SIFT computation per image
    for the locked cube and native SIFT; the scene lists reuse the pairs' distances); each cube
    still holds exactly what evaluating its settings alone gives."""
    from metricalc.benchmarks.hpatches_sequences.demo import LOCKED_DETECTOR
    from metricalc.keypoints.detectors import available_methods
    from metricalc.keypoints.pipeline import EvaluationSettings, evaluate_sequences
    from metricalc.keypoints.sequences import load_sequences
    from metricalc.report.study import DEMO_NATIVE

    out, result = quick_demo
    assert result.returncode == 0, result.stderr
    native = tuple(m for m in DEMO_NATIVE if m in available_methods())
    assert LOCKED_DETECTOR in native  # the shared extraction is taken
    settings = EvaluationSettings(descriptors=native, keypoints="native", seed=0)
    alone = evaluate_sequences(load_sequences(out / "benchmark"), settings)
    demo_cube = metricalc.cube.open_cube(out / "cube_native.nc")
    assert alone.drop_vars("processing_time_ms").equals(demo_cube.drop_vars("processing_time_ms"))
    locked = metricalc.cube.open_cube(out / "cube_locked.nc")
    took = [float(c.processing_time_ms.sel(descriptor="sift")) for c in (demo_cube, locked)]
    assert took[0] == took[1]  # native SIFT's part is the locked cube's, not evaluated again


def test_a_second_demo_reuses_its_cubes(quick_demo, tmp_path, monkeypatch):
    """A second demo in the folder of a first (a copy of ``quick_demo``'s, which computed both
    cubes there) reads both cubes back: it extracts and evaluates nothing."""
    from metricalc.benchmarks.hpatches_sequences import demo
    from metricalc.keypoints import pipeline

    first, result = quick_demo
    assert result.returncode == 0, result.stderr
    for mode in ("locked", "native"):  # the first run computed and wrote them
        assert len(metricalc.cube.open_cube(first / f"cube_{mode}.nc").attrs["cache_key"]) == 24
    shutil.copytree(first, tmp_path / "demo")

    def no_evaluation(*args, **kwargs):
        raise AssertionError("evaluated again")

    monkeypatch.setattr(pipeline, "evaluate", no_evaluation)
    monkeypatch.setattr(pipeline, "extract", no_evaluation)
    again = demo.run_demo(tmp_path / "demo", quick=True, image_retrieval=True, progress=False)
    assert again.reused == {"locked": True, "native": True}
    for mode in ("locked", "native"):
        assert again.cubes[mode].identical(metricalc.cube.open_cube(first / f"cube_{mode}.nc"))
    # a changed input misses the cache: tests/report/test_report_cache.py


def test_keypoints_eval_takes_the_demos_cubes_from_its_cache(quick_demo, tmp_path, evaluations):
    """``keypoints eval --cache <demo folder>`` with the demo's settings is the demo's cache
    entry (the pipeline's one key): it extracts and evaluates nothing and writes the demo's cube;
    other settings miss it and are kept in the folder under their key."""
    from metricalc.keypoints.detectors import available_methods
    from metricalc.report.study import DEMO_LOCKED, DEMO_NATIVE

    first, result = quick_demo
    assert result.returncode == 0, result.stderr
    cache = tmp_path / "demo"
    shutil.copytree(first, cache)
    calls = evaluations  # the calls of metricalc.keypoints.evaluate
    native = ",".join(m for m in DEMO_NATIVE if m in available_methods())
    data = ["--data", str(cache / "benchmark"), "--cache", str(cache), "--no-progress"]
    for mode, options in (
        ("native", ["--descriptors", native]),  # the native cube has no image retrieval
        ("locked", ["--descriptors", ",".join(DEMO_LOCKED), "--locked", "sift",
                    "--image-retrieval"]),
    ):  # fmt: skip
        out = tmp_path / f"{mode}.nc"
        assert run("keypoints", "eval", *data, *options, "--out", str(out)).returncode == 0
        demo_cube = metricalc.cube.open_cube(first / f"cube_{mode}.nc")
        written = metricalc.cube.open_cube(out)
        assert written.attrs["cache_key"] == demo_cube.attrs["cache_key"]
        assert written.drop_attrs().identical(demo_cube.drop_attrs())
    assert calls == []  # both read back: nothing extracted, nothing evaluated
    assert sorted(p.name for p in cache.glob("*.nc")) == ["cube_locked.nc", "cube_native.nc"]
    sift = [*data, "--descriptors", "sift", "--out", str(tmp_path / "sift.nc")]
    assert run("keypoints", "eval", *sift).returncode == 0
    key = metricalc.cube.open_cube(tmp_path / "sift.nc").attrs["cache_key"]
    assert calls == ["native"] and (cache / f"{key}.nc").is_file()  # missed, then kept
    assert run("keypoints", "eval", *sift).returncode == 0
    assert calls == ["native"]


def test_keypoints_eval_refuses_a_cache_that_is_a_file(tmp_path):
    taken = tmp_path / "cubes"
    taken.write_text("a file")
    result = run("keypoints", "eval", "--data", tmp_path / "missing", "--cache", taken,
                 "--out", tmp_path / "cube.nc")  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"metricalc: error: --cache {taken} is a file; expected a folder"
    ]
    assert taken.read_text() == "a file" and not (tmp_path / "cube.nc").exists()


def test_the_demo_study_report_after_the_demo_deletes_none_of_the_demo(quick_demo, tmp_path):
    """README's order: ``metricalc demo``, then ``metricalc report reports/demo.yaml`` (here a
    copy of the demo's folder and the study, quick and with fast tests), which renders the same
    study into the demo's report folder: every other file of the demo stays as it was (its
    figures, cubes, metric sets, benchmark), and there is one report page."""
    import yaml

    from metricalc.datasets import QUICK_SCENES

    first, result = quick_demo
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "demo"  # the study folder of tmp_path/demo.yaml
    shutil.copytree(first, folder)

    def files() -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes()
                for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip

    before = files()
    assert {f"figures/{mode}_map_by_split.png" for mode in ("locked", "native")} <= set(before)
    study = yaml.safe_load((Path(metricalc.__file__).parents[1] / "reports/demo.yaml").read_text())
    study["data"].update(descriptors=["sift", "rootsift"], scenes=list(QUICK_SCENES))
    study.update(figures=["map_by_split"], tests={"n_resamples": 99, "rank": False})
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(study))
    done = run("report", str(tmp_path / "demo.yaml"), "--no-progress")
    assert done.returncode == 0, done.stderr
    after = files()
    demo_files = {name for name in before if not name.startswith("report/")}
    assert {name: after.get(name) for name in demo_files} == {n: before[n] for n in demo_files}
    assert f"report: {folder / 'report' / 'report.html'}" in done.stdout
    pages = sorted(name for name in after if name.endswith("report.html"))
    assert pages == ["report/report.html"]
    assert "RootSIFT" in (folder / "report" / "tables.tex").read_text()  # the new study's report


PROTOCOL_NAMES = {
    "mean_precision", "legacy_macro_precision_by_scene", "true_map_micro",
    "true_map_macro_by_scene", "viewpoint_map", "illumination_map",
    "true_map_micro_including_zeros", "true_map_macro_by_scene_including_zeros",
    "hit_rate_at_1", "hit_rate_at_5", "hit_rate_at_10", "recall_at_1", "recall_at_5",
    "recall_at_10", "total_queries_processed", "total_queries_excluded", "r0_rate",
    "keypoint_verification_ap", "keypoint_retrieval_ap", "processing_time_ms",
}  # fmt: skip


def test_keypoints_make_dataset_eval_and_metrics(tmp_path):
    data, cube_path = tmp_path / "data", tmp_path / "cube.nc"
    assert run("keypoints", "make-dataset", str(data), "--quick").returncode == 0
    result = run(
        "keypoints", "eval", "--data", str(data), "--descriptors", "sift,orb", "--locked", "sift",
        "--out", str(cube_path), "--no-progress", "--no-bojanic",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    shown = run("metrics", str(cube_path))
    assert shown.returncode == 0 and "sift" in shown.stdout
    as_json = run("metrics", str(cube_path), "--json")
    values = json.loads(as_json.stdout)
    assert set(values) == {"sift", "orb"}
    assert set(values["sift"]) >= PROTOCOL_NAMES
    assert values["sift"]["total_queries_processed"] > 0


def test_eval_of_missing_data_is_a_clear_error(tmp_path):
    result = run("keypoints", "eval", "--data", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "c.nc"))  # fmt: skip
    assert result.returncode == 2
    assert "nope" in result.stderr and "Traceback" not in result.stderr


def test_an_unknown_descriptor_points_to_the_features_option(tmp_path):
    """On the command line your own descriptor is --features NAME=DIR, not a Python call."""
    result = run("keypoints", "eval", "--data", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "c.nc"), "--descriptors", "sift,mine")  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "metricalc: error: --descriptors mine: not a built-in method (available: sift, "
        "rootsift, dspsift, orb, brief, brisk, akaze, kaze, raw_patch); evaluate your own "
        "descriptor with --features mine=DIR (DIR/<scene>/1.npz .. 6.npz, see docs/features.md)"
    )


def test_metrics_of_a_broken_file_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken.nc"
    broken.write_text("not a cube")
    result = run("metrics", str(broken))
    assert result.returncode == 2
    assert "broken.nc" in result.stderr and "Traceback" not in result.stderr


def test_unknown_verb_is_a_usage_error_without_traceback():
    result = run("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_verb_prints_help():
    result = run()
    assert result.returncode == 0
    assert "usage: metricalc" in result.stdout


def test_bad_cutoffs_are_a_usage_error(tmp_path):
    result = run("metrics", str(tmp_path / "cube.nc"), "--k", "a")
    assert result.returncode == 2
    assert "expected positive integers" in result.stderr and "Traceback" not in result.stderr


def test_eval_refuses_bad_protocol_and_directory_output_before_any_work(tmp_path):
    result = run("keypoints", "eval", "--data", str(tmp_path), "--out", str(tmp_path / "c.nc"),
                 "--tau", "-1")  # fmt: skip
    assert result.returncode == 2 and "tau must be a finite number >= 0; got -1" in result.stderr
    result = run("keypoints", "eval", "--data", str(tmp_path), "--out", str(tmp_path))
    assert result.returncode == 2 and "is a directory" in result.stderr


RETRIEVAL = HPATCHES_RETRIEVAL


def write_oracle_results(name: str, out: Path) -> Path:
    """Each query first, then the rest of its cluster, then other patches of the cluster's
    images, then the rest: patch and image mAP = 1."""
    from metricalc.benchmarks.hpatches_patches import read_benchmark, read_labels, write_results

    benchmark = read_benchmark(RETRIEVAL / f"{name}.benchmark")
    labels = read_labels(RETRIEVAL / f"{name}.labels")
    others = [s for cluster in labels.clusters for s in cluster]
    lists = []
    for query, cluster in zip(benchmark.queries, labels.clusters, strict=True):
        images = {s.rsplit(".", 1)[0] for s in cluster}
        rest = [s for s in others if s not in cluster]
        rest.sort(key=lambda s: s.rsplit(".", 1)[0] not in images)  # same images first (stable)
        ranked = [query, *[s for s in cluster if s != query], *rest][:51]
        lists.append(ranked)
    path = out / f"{name}.results"
    write_results(path, benchmark.pool, lists)
    return path


def test_patches_eval_of_an_oracle_results_file(tmp_path):
    results = write_oracle_results("train_example", tmp_path)
    out = run("patches", "eval", "--benchmark", str(RETRIEVAL / "train_example.benchmark"),
              "--labels", str(RETRIEVAL / "train_example.labels"), "--results", str(results),
              "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    values = json.loads(out.stdout)
    assert values == {"patch_retrieval_map": 1.0, "image_retrieval_map": 1.0, "n_queries": 50}


def test_patches_eval_of_a_folder_continues_past_a_broken_file(tmp_path):
    write_oracle_results("train_example", tmp_path)
    (tmp_path / "train_easy_5s_00.results").write_text("not,a,valid,header\n")
    out = run("patches", "eval", "--benchmarks", str(RETRIEVAL), "--results", str(tmp_path),
              "--json")  # fmt: skip
    assert out.returncode == 1
    payload = json.loads(out.stdout)
    assert [f["file"] for f in payload["files"]] == ["train_example"]
    assert payload["files"][0]["patch_retrieval_map"] == 1.0
    assert "train_easy_5s_00.results" in payload["errors"][0]["file"]
    assert "train_easy_5s_00" in out.stderr and "Traceback" not in out.stderr


def test_patches_compute_then_eval(tmp_path):
    import numpy as np

    from metricalc.benchmarks.hpatches_patches import read_benchmark, read_labels, read_results

    benchmark = read_benchmark(RETRIEVAL / "train_example.benchmark")
    labels = read_labels(RETRIEVAL / "train_example.labels")
    rows: dict[str, int] = {}
    for signature in [s for cluster in labels.clusters for s in cluster]:
        image, index = signature.rsplit(".", 1)
        rows[image] = max(rows.get(image, 0), int(index) + 1)
    rng = np.random.default_rng(0)
    for image in benchmark.pool:
        sequence, name = image.split(".")
        (tmp_path / "desc" / sequence).mkdir(parents=True, exist_ok=True)
        np.save(tmp_path / "desc" / sequence / f"{name}.npy",
                rng.random((rows.get(image, 1), 8), dtype=np.float32))  # fmt: skip
    out = tmp_path / "train_example.results"
    result = run(
        "patches", "compute", "--benchmark", str(RETRIEVAL / "train_example.benchmark"),
        "--descriptors", str(tmp_path / "desc"), "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lists = read_results(out).results
    assert len(lists) == 50 and all(len(r) == 51 for r in lists)
    assert [r[0] for r in lists] == list(benchmark.queries)
    scored = run("patches", "eval", "--benchmark", str(RETRIEVAL / "train_example.benchmark"),
                 "--labels", str(RETRIEVAL / "train_example.labels"), "--results", str(out),
                 "--json")  # fmt: skip
    values = json.loads(scored.stdout)
    assert 0 <= values["patch_retrieval_map"] < 0.5  # random descriptors: far from the oracle
