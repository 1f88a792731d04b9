"""metricalc inspect never puts runs evaluated with different thresholds side by side silently:
the differing settings are printed, each run is labelled with its values, and the page says so."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml

from metricalc.cli import main
from metricalc.experiment import run
from metricalc.experiment.inspect import load_runs, render_page, setting_differences
from metricalc.experiment.rundir import RunDir

QUICK = ["data.quick=true", "data.size=192", "model.max_keypoints=100"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """A quick SIFT run, a copy of it (``same``), and a copy whose conf.yaml says it was
    evaluated with tau = 5 px and a RANSAC threshold of 5 px (``loose``)."""
    outputs = tmp_path_factory.mktemp("outputs")
    result = run("hpatches", "sift", overrides=QUICK, outputs=outputs, db=False)
    assert result.status == "ok", result.error
    source = RunDir(outputs, "hpatches", "sift").path
    for tag in ("same", "loose"):
        shutil.copytree(source, source.parent / tag, ignore=shutil.ignore_patterns(".lock"))
    conf = RunDir(outputs, "hpatches", "loose").conf
    values = yaml.safe_load(conf.read_text())
    values["eval"].update(tau=5.0, ransac_th=5.0)
    conf.write_text(yaml.safe_dump(values))
    return outputs


def test_differences_name_each_setting_and_run(outputs):
    same = load_runs("hpatches", ["sift", "same"], outputs=outputs)
    assert setting_differences(same) == {}
    mixed = load_runs("hpatches", ["sift", "same", "loose"], outputs=outputs)
    assert setting_differences(mixed) == {
        "eval.ransac_th": {"sift": 3.0, "same": 3.0, "loose": 5.0},
        "eval.tau": {"sift": 3.0, "same": 3.0, "loose": 5.0},
    }


def test_cli_prints_the_differences_and_labels_the_rows(outputs, tmp_path, capsys):
    out = tmp_path / "page.html"
    argv = ["inspect", "hpatches", "sift", "loose", "--outputs", str(outputs), "--out", str(out)]
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "note: these runs were evaluated with different settings:" in shown
    assert "  eval.tau: sift 3.0, loose 5.0" in shown
    assert "│ sift (eval.ransac_th=3.0, eval.tau=3.0)" in shown
    assert "│ loose (eval.ransac_th=5.0, eval.tau=5.0)" in shown
    assert main(["inspect", "hpatches", "sift", "same", "--outputs", str(outputs),
                 "--out", str(out)]) == 0  # fmt: skip
    shown = capsys.readouterr().out
    assert "different settings" not in shown and "│ same " in shown


def test_page_warns_and_labels_the_legend(outputs, tmp_path):
    page = render_page(load_runs("hpatches", ["sift", "loose"], outputs=outputs), page_dir=tmp_path)
    assert 'id="settings" class="warning"' in page
    assert "<code>eval.ransac_th</code>: sift = 3.0; loose = 5.0" in page
    data = json.loads(re.search(r'id="inspect-data">(.*?)</script>', page, re.S)[1])
    assert [e["label"] for e in data["experiments"]] == [
        "sift (eval.ransac_th=3.0, eval.tau=3.0)",
        "loose (eval.ransac_th=5.0, eval.tau=5.0)",
    ]
    same = render_page(load_runs("hpatches", ["sift", "same"], outputs=outputs), page_dir=tmp_path)
    assert 'id="settings"' not in same
