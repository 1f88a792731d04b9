"""``metricalc decompose detection``, run in-process as a user runs it (``tests/cli_helpers``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from metricalc.benchmarks.coco import evaluate, load_detections, load_ground_truth
from metricalc.benchmarks.coco.generator import make_coco_dataset
from tests.cli_helpers import run_cli as run

STATS = ["AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("coco")
    gt, dt = make_coco_dataset(n_images=12, n_categories=3, segm=True, crowd_rate=0.1, seed=7)
    (folder / "gt.json").write_text(json.dumps(gt))
    (folder / "dt.json").write_text(json.dumps(dt))
    return folder


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_json_holds_the_coco_stats_next_to_the_decomposition(files, iou_type):
    result = run(
        "decompose", "detection", "--gt", str(files / "gt.json"), "--dt", str(files / "dt.json"),
        "--iou-type", iou_type, "--json",
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert list(payload["stats"]) == STATS
    gt = load_ground_truth(files / "gt.json")
    standard = evaluate(gt, load_detections(files / "dt.json", gt), iou_type=iou_type)
    got = np.array([np.nan if v is None else v for v in payload["stats"].values()])
    np.testing.assert_array_equal(got, standard.stats.values)
    decomposition = payload["decomposition"]
    assert decomposition["identity"]["ok"] is True
    assert decomposition["identity"]["max_deviation"] < 1e-12
    assert decomposition["iou_thresholds"] == [round(0.5 + 0.05 * i, 2) for i in range(10)]
    stages = ["L", "C|L"] + (["S|C,L"] if iou_type == "segm" else [])
    assert decomposition["stages"] == stages
    assert [row["perfect_stage"] for row in decomposition["what_if"]] == stages
    assert set(decomposition["factor_ap"]) == set(stages)


def test_text_output_and_figures(files, tmp_path):
    result = run(
        "decompose", "detection", "--gt", str(files / "gt.json"), "--dt", str(files / "dt.json"),
        "--convention", "decompovision", "--iou", "0.5,0.6", "--out", str(tmp_path),
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    for text in ("COCO bbox evaluation", "decompovision convention", "What if", "identity"):
        assert text in result.stdout
    for name in ("factor_curves", "what_if"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0
        assert (tmp_path / f"{name}.svg").exists()
    summary = json.loads((tmp_path / "decomposition.json").read_text())
    assert summary["decomposition"]["iou_thresholds"] == [0.5, 0.6]


def test_errors_exit_2_without_traceback(files, tmp_path):
    missing = run("decompose", "detection", "--gt", str(tmp_path / "no.json"), "--dt",
                  str(files / "dt.json"))
    assert missing.returncode == 2
    assert missing.stderr.startswith("metricalc: error:") and "Traceback" not in missing.stderr
    bad = tmp_path / "dt.json"
    bad.write_text(json.dumps([{"image_id": -5, "category_id": 1, "bbox": [0, 0, 1, 1],
                                "score": 1}]))
    wrong = run("decompose", "detection", "--gt", str(files / "gt.json"), "--dt", str(bad))
    assert wrong.returncode == 2 and "image_id -5" in wrong.stderr
    usage = run("decompose", "detection", "--gt", "a", "--dt", "b", "--iou", "2")
    assert usage.returncode == 2 and "IoU thresholds" in usage.stderr


def test_readme_example_runs():
    """The first example of the README section runs as written (fenced ```py so that the core's
    README test, which checks the names of the last ```python block, is not disturbed)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text.split("## Metric decomposition")[1].split("\n## ")[0]
    block = re.findall(r"```py\n(.*?)```", section, flags=re.S)[0]
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["result"].verification.ok
    assert list(namespace["result"].table.index) == ["L", "C|L"]


def test_unwritable_out_folder_is_an_error_not_a_traceback(files, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run(
        "decompose", "detection", "--gt", str(files / "gt.json"), "--dt", str(files / "dt.json"),
        "--iou", "0.5", "--out", str(blocker / "out"), "--no-progress",
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("metricalc: error: cannot write") and "Traceback" not in (
        result.stderr
    )
    assert str(blocker / "out") in result.stderr
