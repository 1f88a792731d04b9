"""The examples of README.md run as written (they are the first thing a newcomer tries).

Blocks fenced ```python run here; blocks fenced ```py need data a test cannot have (HPatches,
a user's table) and are illustrations.

Every ``metricalc ...`` line of the ```bash blocks runs in-process (:func:`metricalc.cli.main`)
in a folder holding the session's example inputs (:func:`tests.examples_helpers.workspace`:
the file and folder names the README uses), except a line whose comment says ``external data``
(HPatches, a user's files) and the lines of :data:`tests.examples_helpers.NOT_RUN_HERE`.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests import examples_helpers as examples

README = examples.ROOT / "README.md"


@pytest.fixture(scope="module")
def readme_cubes(tmp_path_factory: pytest.TempPathFactory):
    return examples.workspace(tmp_path_factory, "readme")


def test_readme_has_compare_examples():
    assert sum(" compare " in f" {line} " for line in examples.bash_commands(README)) >= 3


@pytest.mark.parametrize(
    "line",
    [examples.command_case(line) for line in examples.bash_commands(README)],
    ids=[examples.case_id(line) for line in examples.bash_commands(README)],
)
def test_readme_command_runs(line, readme_cubes, monkeypatch, capsys):
    examples.run_command(line, readme_cubes, monkeypatch, capsys)


def test_readme_python_examples_run():
    blocks = examples.python_blocks(README)
    assert blocks, "README.md has no python example"
    for block in blocks:
        namespace = examples.run_python_block(block, README)
    # the example's claims: counts along a descending threshold dim, Wilson interval [0.34, 1]
    counts = namespace["c"]
    assert counts.tp.dims == ("threshold",)
    assert (np.diff(counts.cutoff.values) < 0).all()
    ci = namespace["mc"].rate_confint({"tp": 2, "fn": 0}, "tpr")
    assert round(float(ci.low), 2) == 0.34 and float(ci.high) == 1.0


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    commands = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert "metricalc demo" in commands[0]
    assert "pip install" in commands[0]
    assert 'pip install ".[test]"' in commands[1] and "python -m pytest" in commands[1]


def test_the_reports_readme_names_the_descriptors_of_each_study():
    """reports/README.md describes each study with the display names of exactly the
    descriptors its YAML evaluates (a name of another descriptor, or a missing one, fails)."""
    import yaml

    folder = examples.ROOT / "reports"
    rows = dict(re.findall(r"^\| `([\w-]+\.yaml)` \| (.*) \|$", (folder / "README.md").read_text(),
                           flags=re.MULTILINE))  # fmt: skip
    studies = sorted(p.name for p in folder.glob("*.yaml"))
    assert sorted(rows) == studies
    known = {"sift": "SIFT", "rootsift": "RootSIFT", "dspsift": "DSP-SIFT", "orb": "ORB",
             "brief": "BRIEF", "brisk": "BRISK", "akaze": "AKAZE", "kaze": "KAZE",
             "raw_patch": "Raw patch"}  # fmt: skip
    for study in studies:
        spec = yaml.safe_load((folder / study).read_text())
        shown = {**known, **spec.get("names", {})}
        # a name on its own, not "the SIFT detector's" (keypoints, not a descriptor)
        named = {
            d for d, name in shown.items()
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])(?! detector)", rows[study])
        }  # fmt: skip
        assert named == set(spec["data"]["descriptors"]), (study, named)
