"""A corpus of malformed inputs, every format the command line reads: a clean error or a result.

Each format starts from a small valid file; hypothesis mutates its bytes (truncation, byte
flips, inserted and deleted runs, duplicated and dropped lines, a text encoding other than
UTF-8) and the command line reads the result. The command must either succeed (the mutation
left the file valid) or exit 2 with exactly one line on standard error,
``metricalc: error: ...``, and no traceback; an output it was asked to write does not appear.
Examples are derandomized, so CI runs the same few hundred cases every time.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).parent / "data"
WORKBENCH = DATA / "descriptorworkbench-export" / "descriptor_performance_analysis.csv"
RETRIEVAL = DATA / "hpatches-eccv2016-retrieval"

CASES = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- mutations ---------------------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """``valid`` after one to three random edits of its bytes or lines."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "lines", "utf16"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif kind == "lines":
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, max(0, len(lines) - 1)))
            lines[i:i] = [lines[i]] if draw(st.booleans()) and lines else []
            if draw(st.booleans()) and lines:
                del lines[i]
            data = bytearray(b"\n".join(lines))
        elif kind == "utf16":
            data = bytearray(bytes(data).decode("utf-8", "replace").encode("utf-16"))
    return bytes(data)


def _clean(result, *outputs: Path) -> None:
    """The command succeeded, or failed with one ``metricalc: error:`` line and wrote nothing."""
    if result.returncode == 0:
        return
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert len(lines) == 1 and lines[0].startswith("metricalc: error: "), result.stderr[-3000:]
    for output in outputs:
        assert not output.exists(), f"{output} written although the command failed"


# --- the valid seeds ---------------------------------------------------------------------------

QRELS = b"".join(
    f"{q} 0 d{d} {int((q + d) % 3 == 0)}\n".encode() for q in range(1, 4) for d in range(6)
)
RUN = b"".join(
    f"{q} Q0 d{d} {r} {1.0 - r / 10:.2f} mine\n".encode()
    for q in range(1, 4)
    for r, d in enumerate((3, 0, 5, 1, 4, 2))
)
GROUND_TRUTH = {
    "images": [{"id": 1, "height": 20, "width": 20}, {"id": 2, "height": 20, "width": 20}],
    "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
    "annotations": [
        {"id": i, "image_id": 1 + i % 2, "category_id": 1 + i // 3, "bbox": [i, i, 5, 4],
         "area": 20.0, "iscrowd": 0}
        for i in range(1, 6)
    ],
}  # fmt: skip
DETECTIONS = [
    {"image_id": 1 + i % 2, "category_id": 1 + i // 3, "bbox": [i, i + 1, 5, 4], "score": 0.1 * i}
    for i in range(1, 7)
]
STUDY = b"""title: My study
data: {cube: cube.nc}
baseline: good
metrics: [true_map_micro, viewpoint_map]
tests: {n_resamples: 99, rank: false, pair_by: pair}
figures: [forest]
outputs: [csv]
names: {good: Good}
"""


def _workbench_seed() -> bytes:
    lines = WORKBENCH.read_bytes().splitlines(keepends=True)
    return b"".join(lines[:3])


@pytest.fixture(scope="module")
def patch_seeds(tmp_path_factory) -> dict[str, Path]:
    """``train_example`` with random descriptors of its patches and the results they give."""
    from metricalc.benchmarks.hpatches_patches import read_benchmark, read_labels

    root = tmp_path_factory.mktemp("patches")
    for suffix in (".benchmark", ".labels"):
        shutil.copy(RETRIEVAL / f"train_example{suffix}", root / f"task{suffix}")
    benchmark = read_benchmark(root / "task.benchmark")
    labels = read_labels(root / "task.labels")
    counts: dict[tuple[str, str], int] = {}
    for signature in [s for cluster in labels.clusters for s in cluster]:
        sequence, image, index = signature.rsplit(".", 2)
        counts[sequence, image] = max(counts.get((sequence, image), 0), int(index) + 1)
    rng = np.random.default_rng(0)
    for name in benchmark.pool:
        sequence, image = name.rsplit(".", 1)
        rows = rng.normal(size=(counts.get((sequence, image), 1), 8))
        folder = root / "descriptors" / sequence
        folder.mkdir(parents=True, exist_ok=True)
        np.savetxt(folder / f"{image}.csv", rows, delimiter=",", fmt="%.5f")
    done = run_cli(
        "patches", "compute", "--benchmark", root / "task.benchmark",
        "--descriptors", root / "descriptors", "--out", root / "task.results", "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {
        "benchmark": root / "task.benchmark",
        "labels": root / "task.labels",
        "results": root / "task.results",
        "descriptors": root / "descriptors",
    }


# --- one test per format -----------------------------------------------------------------------


@CASES
@given(data=st.data())
def test_descriptorworkbench_csv(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("dw")
    path = folder / "export.csv"
    path.write_bytes(data.draw(mutated(_workbench_seed())))
    out, db = folder / "cube.nc", folder / "r.sqlite"
    _clean(run_cli("db", "import-workbench", path, "--db", db, "--out", out), out, db)


@CASES
@given(data=st.data(), which=st.sampled_from(["gt", "dt"]))
def test_coco_json(tmp_path_factory, data, which):
    folder = tmp_path_factory.mktemp("coco")
    files = {"gt": folder / "gt.json", "dt": folder / "dt.json"}
    files["gt"].write_text(json.dumps(GROUND_TRUTH))
    files["dt"].write_text(json.dumps(DETECTIONS))
    files[which].write_bytes(data.draw(mutated(files[which].read_bytes())))
    out = folder / "decomposition.nc"
    result = run_cli(
        "decompose", "detection", "--gt", files["gt"], "--dt", files["dt"], "--out", out,
        "--no-progress",
    )  # fmt: skip
    _clean(result, out)


@CASES
@given(data=st.data(), which=st.sampled_from(["qrels", "run"]))
def test_trec_files(tmp_path_factory, data, which):
    folder = tmp_path_factory.mktemp("trec")
    files = {"qrels": folder / "qrels", "run": folder / "run"}
    files["qrels"].write_bytes(QRELS)
    files["run"].write_bytes(RUN)
    files[which].write_bytes(data.draw(mutated(files[which].read_bytes())))
    _clean(run_cli("trec-eval", files["qrels"], files["run"]))


@CASES
@given(data=st.data(), which=st.sampled_from(["benchmark", "labels", "results"]))
def test_patch_retrieval_files(tmp_path_factory, patch_seeds, data, which):
    folder = tmp_path_factory.mktemp("task")
    files = {k: folder / patch_seeds[k].name for k in ("benchmark", "labels", "results")}
    for name, path in files.items():
        path.write_bytes(patch_seeds[name].read_bytes())
    files[which].write_bytes(data.draw(mutated(files[which].read_bytes())))
    result = run_cli(
        "patches", "eval", "--benchmark", files["benchmark"], "--labels", files["labels"],
        "--results", files["results"], "--json",
    )  # fmt: skip
    _clean(result)


@CASES
@given(data=st.data())
def test_patch_descriptor_files(tmp_path_factory, patch_seeds, data):
    folder = tmp_path_factory.mktemp("descriptors")
    shutil.copytree(patch_seeds["descriptors"], folder / "d")
    victim = sorted((folder / "d").rglob("*.csv"))[data.draw(st.integers(0, 5))]
    victim.write_bytes(data.draw(mutated(victim.read_bytes())))
    out = folder / "task.results"
    result = run_cli(
        "patches", "compute", "--benchmark", patch_seeds["benchmark"], "--descriptors",
        folder / "d", "--out", out, "--no-progress",
    )  # fmt: skip
    _clean(result, out)


@CASES
@given(data=st.data())
def test_study_files(tmp_path_factory, make_query_cube, data):
    from metricalc import cube as qc
    from metricalc.errors import InvalidInputError
    from metricalc.report.study import load_study

    folder = tmp_path_factory.mktemp("study")
    qc.save(make_query_cube({"good": 0.8, "poor": 0.3}, seed=1), folder / "cube.nc")
    path = folder / "mine.yaml"
    path.write_bytes(data.draw(mutated(STUDY)))
    try:  # the parse: a Study or a one-line error naming the file (building is tested apart)
        load_study(path)
    except InvalidInputError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error), str(error)


def test_damaged_cube_and_database_files_never_crash(tmp_path, make_query_cube):
    """Cube (HDF5) and SQLite files cut short or with flipped bytes, read in a child process
    (a crash of the HDF5 or SQLite library would take pytest down with it): every read ends
    in success or a clean error, never a signal."""
    from metricalc import cube as qc

    cube_path = tmp_path / "cube.nc"
    qc.save(make_query_cube({"good": 0.8, "poor": 0.3}, seed=1), cube_path)
    db = tmp_path / "r.sqlite"
    assert run_cli("db", "import-workbench", WORKBENCH, "--db", db).returncode == 0
    rng = np.random.default_rng(0)
    cases = []
    for source, argv in ((cube_path, ["metrics"]), (db, ["db", "list", "--db"])):
        valid = source.read_bytes()
        for k in range(12):
            damaged = bytearray(valid)
            if k % 2:
                del damaged[int(rng.integers(1, len(valid))) :]
            else:
                for at in rng.integers(0, len(valid), size=int(rng.integers(1, 40))):
                    damaged[at] = int(rng.integers(0, 256))
            path = tmp_path / f"{k}{source.suffix}"
            path.write_bytes(bytes(damaged))
            cases.append([*argv, str(path)])
    script = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from metricalc.cli import main
        for argv in json.loads({json.dumps(json.dumps(cases))}):
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = main(argv)
            lines = err.getvalue().strip().splitlines()
            clean = len(lines) == 1 and lines[0].startswith("metricalc: error: ")
            ok = code == 0 or (code == 2 and clean)
            print(json.dumps([argv[-1], code, ok, err.getvalue()[-500:]]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    outcomes = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(outcomes) == len(cases)
    bad = [o for o in outcomes if not o[2]]
    assert not bad, bad


@pytest.mark.parametrize(
    ("qrels", "run", "message"),
    [
        (b"1 0 d0 1\n3 0 d0 \n", RUN, r"qrels line 2: expected 4 fields"),  # an empty rel field
        (QRELS, b"1 Q0 d0 1  mine\n", r"run line 1: expected 6 fields"),  # an empty score field
    ],
)
def test_an_empty_trec_field_is_named_not_cast(tmp_path, qrels, run, message):
    (tmp_path / "qrels").write_bytes(qrels)
    (tmp_path / "run").write_bytes(run)
    result = run_cli("trec-eval", tmp_path / "qrels", tmp_path / "run")
    assert result.returncode == 2
    assert re.search(message, result.stderr), result.stderr
