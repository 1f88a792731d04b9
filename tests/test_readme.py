"""The examples of README.md run as written (they are the first thing a newcomer tries).

Blocks fenced ```python run here; blocks fenced ```py need data a test cannot have (HPatches,
a user's table) and are illustrations.

The ``metricalc ...`` lines of the ```bash blocks run in-process (:func:`metricalc.cli.main`)
when their verb is one of :data:`RUN_VERBS`, on cubes of the built-in benchmark made once per
session (``locked.nc``, ``native.nc``, ``pessimistic.nc``, ``both.nc``, the TREC files
``qrels.txt`` and runs, and ``cube.nc``, the per-scene cube of the real DescriptorWorkbench
export: the file names the README uses).
The explicit rules for the other lines: a line whose comment says ``external data`` needs data
the tests cannot make (HPatches, a user's files) and is skipped; a verb outside
:data:`RUN_VERBS` is skipped with the reason of :data:`NOT_RUN_HERE`.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

RUN_VERBS = ("compare", "metrics", "trec-eval", "trec-export")
"""Verbs whose README lines run here, on the session's cubes and TREC files."""

NOT_RUN_HERE = {
    "keypoints": "builds or evaluates a whole benchmark (tests/test_cli.py runs it on a small one)",
    "patches": "needs a patch benchmark (tests/test_patch_*.py build one)",
    "eval": "an experiment run of minutes (tests/test_experiment_*.py)",
    "inspect": "needs experiment runs (tests/test_inspect.py)",
    "db": "needs a results database (tests/test_store_cli.py)",
    "report": "builds a whole report (tests/test_report_build.py)",
    "demo": "the whole demo (tests/test_report_build.py)",
    "decompose": "needs detections or a keypoint cube with distances (tests/test_decompose_cli.py)",
}
"""Verbs whose README lines are not run here, and where they are tested."""

EXTERNAL = "external data"
"""The comment that marks a README line needing data the tests cannot make."""


def readme_commands() -> list[str]:
    """Every ``metricalc ...`` line of the ```bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [line.strip() for line in lines if line.strip().startswith("metricalc ")]


def command_case(line: str) -> object:
    verb = shlex.split(line, comments=True)[1]
    if EXTERNAL in line.partition("#")[2]:
        return pytest.param(line, marks=pytest.mark.skip(reason="README: needs external data"))
    if verb not in RUN_VERBS:
        reason = NOT_RUN_HERE.get(verb, "")
        assert reason, f"README verb {verb!r}: add it to RUN_VERBS or NOT_RUN_HERE"
        return pytest.param(line, marks=pytest.mark.skip(reason=f"{verb}: {reason}"))
    return line


@pytest.fixture(scope="session")
def readme_cubes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the README's cubes, from two scenes of the built-in benchmark: SIFT, ORB
    and BRIEF locked on SIFT keypoints (under the ``expected`` and the ``pessimistic`` tie
    policy) and on their own keypoints."""
    from metricalc import cube as qc
    from metricalc.keypoints.evaluate import evaluate
    from metricalc.keypoints.features import extract
    from metricalc.keypoints.synthetic import make_synthetic_dataset

    folder = tmp_path_factory.mktemp("readme")
    scenes = ["i_coffee", "v_brick"]
    sequences = make_synthetic_dataset(folder / "synthetic", scenes=scenes, size=256)
    methods = ("sift", "orb", "brief")
    locked = extract(sequences, methods, locked="sift", max_keypoints=150)
    native = extract(sequences, methods, max_keypoints=150)
    for name, features, keypoints, policy in (
        ("locked", locked, "locked:sift", "expected"),
        ("pessimistic", locked, "locked:sift", "pessimistic"),
        ("native", native, "native", "expected"),
    ):
        cube = evaluate(sequences, features, keypoints=keypoints, tie_policy=policy, bojanic=False)
        qc.save(cube, folder / f"{name}.nc")
    # both.nc of the own-descriptor recipe (tests/test_own_descriptors.py runs the recipe itself)
    both = extract(sequences, ("sift", "rootsift"), locked="sift", max_keypoints=150)
    qc.save(evaluate(sequences, both, keypoints="locked:sift", bojanic=False), folder / "both.nc")
    write_trec_files(folder)
    # cube.nc of the results-database lines: the per-scene cube of the real workbench export
    from metricalc.cli import main

    export = Path(__file__).parent / "data" / "descriptorworkbench-export"
    argv = ["db", "import-workbench", str(export / "descriptor_performance_analysis.csv")]
    assert main([*argv, "--db", str(folder / "r.sqlite"), "--out", str(folder / "cube.nc")]) == 0
    return folder


def write_trec_files(folder: Path) -> None:
    """``qrels.txt`` (graded judgments of 20 queries) and the runs ``run.txt``, ``bm25.run``,
    ``dense.run`` and ``hybrid.run`` (50 scored documents per query, ties included): the TREC
    files the README's trec-eval lines read."""
    rng = np.random.default_rng(0)
    qrels = [
        f"q{q} 0 d{d} {rng.integers(0, 3)}"
        for q in range(20)
        for d in rng.choice(80, 15, replace=False)
    ]
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
    for name in ("run.txt", "bm25.run", "dense.run", "hybrid.run"):
        run = [
            f"q{q} Q0 d{d} {rank + 1} {rng.integers(0, 20) / 4} {name}"
            for q in range(20)
            for rank, d in enumerate(rng.choice(80, 50, replace=False))
        ]
        (folder / name).write_text("\n".join(run) + "\n")


def test_readme_has_compare_examples():
    assert sum(" compare " in f" {line} " for line in readme_commands()) >= 3


@pytest.mark.parametrize(
    "line",
    [command_case(line) for line in readme_commands()],
    ids=[shlex.join(shlex.split(line, comments=True)[1:])[:60] for line in readme_commands()],
)
def test_readme_command_runs(line, readme_cubes, monkeypatch, capsys):
    from metricalc.cli import main

    monkeypatch.chdir(readme_cubes)
    argv = shlex.split(line, comments=True)[1:]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.strip()


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python example"
    for block in blocks:
        namespace: dict[str, object] = {}
        exec(compile(block, str(README), "exec"), namespace)  # fails if the example is stale
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
