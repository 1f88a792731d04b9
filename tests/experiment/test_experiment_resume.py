"""An export killed mid-run (kill -9, Ctrl-C) resumes where it stopped, losing no finished pair;
the CLI (in-process, and once in a subprocess); two tags run at the same time without
interfering."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metricalc.cli import main
from metricalc.datasets.sequences import QUICK_SCENES, make_synthetic_dataset
from metricalc.experiment import run
from metricalc.experiment.rundir import RunDir
from tests.cli_helpers import run_cli
from tests.experiment_helpers import assert_same_run, datasets

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["data.quick=true", "data.size=192", "model.max_keypoints=100"]
"""The quick built-in benchmark, small: four scenes, 20 image pairs."""


def _command(outputs, *extra):
    return [
        sys.executable,
        "-m",
        "metricalc",
        "run",
        "hpatches",
        "--conf",
        "sift",
        "--outputs",
        str(outputs),
        "--no-progress",
        *extra,
    ]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _start(outputs, *extra):
    return subprocess.Popen(
        _command(outputs, *extra),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_parts(process, rundir, count, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the run ended before it was interrupted: {process.communicate()}")
        if len(list(rundir.parts.rglob("1-?.h5"))) >= count:
            return
        time.sleep(0.02)
    process.kill()
    pytest.fail("the export did not start in time")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The same four scenes as a sequences folder (data.root), generated once."""
    root = tmp_path_factory.mktemp("sequences")
    make_synthetic_dataset(root, scenes=QUICK_SCENES, size=256)
    return [f"data.root={root}", "data.quick=true", "model.max_keypoints=200"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, folder):
    outputs = tmp_path_factory.mktemp("reference")
    result = run("hpatches", "sift", overrides=folder, outputs=outputs, scheduler="synchronous")
    assert result.status == "ok", result.error
    return result


def _assert_identical(result, reference):
    assert len(datasets(result.files["predictions"])) == 4 * (6 + 4 * 4)  # image 1 once a scene
    assert_same_run(result, reference)


@pytest.mark.parametrize("how", ["kill", "interrupt"])
def test_an_interrupted_export_resumes_and_matches_an_uninterrupted_run(
    tmp_path, folder, uninterrupted, how
):
    rundir = RunDir(tmp_path, "hpatches", "sift")
    process = _start(tmp_path, "--scheduler", "synchronous", *folder)
    _wait_for_parts(process, rundir, 2)
    process.send_signal(signal.SIGKILL if how == "kill" else signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    if how == "kill":
        assert process.returncode == -signal.SIGKILL
    else:
        assert process.returncode == 130 and "interrupted" in stderr
        assert "Traceback" not in stderr
        assert json.loads(rundir.run_json.read_text())["status"] == "interrupted"
    finished = sorted(p.relative_to(rundir.parts) for p in rundir.parts.rglob("1-?.h5"))
    assert 2 <= len(finished) < 20 and not rundir.predictions.exists()
    # a write cut short leaves at most a temporary file, which the rerun ignores
    (rundir.parts / finished[0].parent / ".1-6.h5.cut.tmp").write_bytes(b"\x89HDF half")

    result = run("hpatches", "sift", overrides=folder, outputs=tmp_path, scheduler="threads")
    assert result.status == "ok", result.error
    assert result.exported and result.evaluated
    assert not rundir.parts.exists()  # merged into predictions.h5 and removed
    _assert_identical(result, uninterrupted)


def test_a_rerun_exports_only_the_missing_pairs(tmp_path, folder, uninterrupted, monkeypatch):
    """Finished pairs are not recomputed."""
    import metricalc.benchmarks.hpatches_sequences.experiment as hp

    rundir = RunDir(tmp_path, "hpatches", "sift")
    process = _start(tmp_path, "--scheduler", "synchronous", *folder)
    _wait_for_parts(process, rundir, 4)
    process.kill()
    process.communicate(timeout=60)
    done = {(p.parent.name, p.stem) for p in rundir.parts.rglob("1-?.h5")}
    computed = []
    real = hp.pair_prediction

    def counting(sequence, k, first, second, model):
        computed.append((sequence.name, f"1-{k}"))
        return real(sequence, k, first, second, model)

    monkeypatch.setattr(hp, "pair_prediction", counting)
    result = run("hpatches", "sift", overrides=folder, outputs=tmp_path, scheduler="synchronous")
    assert result.status == "ok", result.error
    assert len(computed) == 20 - len(done) and not set(computed) & done
    _assert_identical(result, uninterrupted)


def test_cli_runs_and_two_tags_run_at_the_same_time(tmp_path):
    """Two subprocesses with different tags share the outputs root (and generate the synthetic
    benchmark under its lock) without interfering: both complete with identical results."""
    first = _start(tmp_path, "--tag", "one", *QUICK)
    second = _start(tmp_path, "--tag", "two", *QUICK)
    out1, err1 = first.communicate(timeout=300)
    _, err2 = second.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    assert "hpatches / one (exported, evaluated)" in out1 and "AUC@3px" in out1
    assert f"outputs in {tmp_path / 'results' / 'hpatches' / 'one'}" in out1
    results = [
        run("hpatches", "sift", tag=t, overrides=QUICK, outputs=tmp_path) for t in ("one", "two")
    ]
    assert not any(r.exported or r.evaluated for r in results)
    _assert_identical(*results)
    # cached, printed as JSON
    done = run_cli(*_command(tmp_path, "--tag", "one", "--json", *QUICK)[3:])
    assert done.returncode == 0, done.stderr
    summaries = json.loads(done.stdout)
    assert summaries == json.loads((tmp_path / "results/hpatches/one/summaries.json").read_text())


def test_cli_error_in_a_subprocess_exits_2_without_a_traceback(tmp_path):
    done = subprocess.run(
        _command(tmp_path, "eval.foo=1"), env=_env(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr.startswith("metricalc: error: ") and "unknown key 'eval.foo'" in done.stderr
    assert "Traceback" not in done.stderr


def _main(outputs, capsys, *extra):
    code = main(_command(outputs, *extra)[3:])
    return code, capsys.readouterr()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["eval.tau=abc"], "config key eval.tau = 'abc'"),
        (["--scheduler", "nowhere"], "scheduler 'nowhere'"),
        (["notanoverride"], "is not key=value"),
        (["--tag", "a/b"], "tag 'a/b'"),
    ],
)
def test_cli_errors_exit_2(tmp_path, capsys, extra, message):
    code, captured = _main(tmp_path, capsys, *extra)
    assert code == 2
    assert captured.err.startswith("metricalc: error: ") and message in captured.err


def test_cli_conflict_shows_the_difference(tmp_path, capsys, folder, uninterrupted):
    # conf.yaml and predictions.h5 as the reference run wrote them, under a new outputs root
    # (a conf.yaml alone, from a run that failed before exporting, does not hold the tag)
    rundir = RunDir(tmp_path, "hpatches", "sift")
    rundir.path.mkdir(parents=True)
    rundir.conf.write_text(uninterrupted.files["conf"].read_text())
    shutil.copyfile(uninterrupted.files["predictions"], rundir.predictions)
    code, captured = _main(tmp_path, capsys, *folder, "model.max_keypoints=50")
    assert code == 2
    assert "model.max_keypoints: 200 -> 50" in captured.err and "--overwrite" in captured.err


def test_cli_failed_run_exits_2_and_names_the_file(tmp_path, capsys):
    features = tmp_path / "none"
    code, captured = _main(
        tmp_path,
        capsys,
        "data.scenes=[camera]",
        "data.size=256",
        f"model.features={features}",
        "model.descriptor=mine",
    )
    assert code == 2
    assert "run 'sift' failed: InvalidInputError: missing features file" in captured.err
    assert str(features) in captured.err
