"""Shared by the tests that run the examples of README.md and docs/*.md as written.

The examples are collected from the Markdown: blocks fenced ```python run (```py blocks need
data a test cannot have and are illustrations), and every ``metricalc ...`` line of a ```bash
block runs in-process (:func:`metricalc.cli.main`) in one folder made once per session
(:func:`examples_folder`), where the file and folder names the examples use exist: cubes of the
built-in benchmark, TREC files, a quick synthetic benchmark (``data/synthetic``, also as ``D``),
SIFT's keypoints with an own descriptor (``kps/``, ``mine/``), a patch benchmark
(``data/patches``, ``bench/``, ``desc/``, ``results/``, and the real HPatches benchmark file
``train_easy_5s_00`` as ``B.*`` and ``b.*``), the cube ``results.nc``, a results database made
by ``db import-workbench`` (``outputs/metricalc.sqlite``, ``cube.nc``), COCO-style detections
(``gt.json``, ``results.json``, ``results_b.json``) and a study (``my_study.yaml``).

The explicit rules for the lines that do not run: a line whose comment says ``external data``
needs data the tests cannot make (HPatches, a user's files) and is skipped; a line starting with
a command of :data:`NOT_RUN_HERE` is skipped with its reason, which names the test running the
same command.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"

EXTERNAL = "external data"
"""The comment that marks a line needing data the tests cannot make."""

NOT_RUN_HERE = {
    r"demo": "the whole demo, minutes (tests/cli/test_cli.py runs it quick)",
    r"report reports/.*": "a study of the repository, minutes on the whole built-in benchmark "
    "(tests/cli/test_cli.py renders the demo study quick after a quick demo, in README's order, "
    "and "
    "checks that it deletes none of the demo's files)",
    r"run hpatches --conf sift": "the whole built-in benchmark, minutes (the lines with "
    "data.quick=true run here)",
    r"compare reports/demo/.*": "the full demo's cube, 32 scenes (tests/cli/test_cli.py compares "
    "the quick demo's cube: 4 scenes are too few to test over scenes, and it says so)",
}
"""Commands (regular expressions matching the whole command after ``metricalc``) not run here:
minutes long on the built-in data, with where the same command runs."""

PREREQUISITES = {
    "inspect hpatches sift orb_ratio": (
        "run hpatches --conf sift data.quick=true",
        "run hpatches --conf orb --tag orb_ratio model.matcher.ratio=0.8 data.quick=true",
    ),
    "inspect hpatches sift orb": (
        "run hpatches --conf sift data.quick=true",
        "run hpatches --conf orb data.quick=true",
    ),
    "inspect patches sift raw": (
        "run patches --conf sift data.quick=true",
        "run patches --conf raw data.quick=true",
    ),
    "db show sift ": ("run hpatches --conf sift data.quick=true",),
    "compare outputs/results/hpatches/sift outputs/results/hpatches/orb ": (
        "run hpatches --conf sift data.quick=true",
        "run hpatches --conf orb data.quick=true",
    ),
    "compare outputs/results/hpatches/sift/results.h5 outputs/results/hpatches/orb/results.h5 ": (
        "run hpatches --conf sift data.quick=true",
        "run hpatches --conf orb data.quick=true",
    ),
    "compare outputs/results/hpatches/sift outputs/results/hpatches/orb_ratio ": (
        "run hpatches --conf sift data.quick=true",
        "run hpatches --conf orb --tag orb_ratio model.matcher.ratio=0.8 data.quick=true",
    ),
    "compare phototour.fpr95.nc": (  # the README's PhotoTour lines, which come after it
        "patches make-phototour phototour",
        "patches describe-phototour phototour --method sift --out phototour-sift.npy",
        "patches describe-phototour phototour --method raw --out phototour-raw.npy",
        "patches fpr95 --pairs phototour/m50_500_500_0.txt --descriptors phototour-sift.npy "
        "phototour-raw.npy --out phototour.fpr95.nc",
    ),
}
"""The runs a line reads (the ones the examples before it, or after it, make), run first where
their output is missing: a quick run's tag folder, another command's ``--out`` or last argument
(so that each line also runs alone, e.g. with ``-k``)."""


def _made(folder: Path, need: list[str]) -> bool:
    """Whether the output of the prerequisite ``need`` exists in ``folder``."""
    if need[0] == "run":
        tag = need[need.index("--tag") + 1] if "--tag" in need else need[3]
        return (folder / "outputs" / "results" / need[1] / tag).is_dir()
    return (folder / (need[need.index("--out") + 1] if "--out" in need else need[-1])).exists()


def python_blocks(path: Path, fence: str = "python") -> list[str]:
    """The code of the blocks of ``path`` fenced ```<fence>."""
    return re.findall(rf"```{fence}\n(.*?)```", path.read_text(), flags=re.S)


def bash_commands(path: Path) -> list[str]:
    """Every ``metricalc ...`` line of the ```bash blocks of ``path``, continuations joined."""
    blocks = re.findall(r"```bash\n(.*?)```", path.read_text(), flags=re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [" ".join(line.split()) for line in lines if line.strip().startswith("metricalc ")]


def arguments(line: str) -> list[str]:
    """The argv of a ``metricalc ...`` line (its comment dropped)."""
    return shlex.split(line, comments=True)[1:]


def command_case(line: str, *before: object) -> object:
    """The pytest parameters ``(*before, line)``, marked skip (with the reason) if ``line`` does
    not run here."""
    if EXTERNAL in line.partition("#")[2]:
        return pytest.param(*before, line, marks=pytest.mark.skip(reason="needs external data"))
    command = shlex.join(arguments(line))
    for pattern, reason in NOT_RUN_HERE.items():
        if re.fullmatch(pattern, command):
            return pytest.param(*before, line, marks=pytest.mark.skip(reason=reason))
    return pytest.param(*before, line)


def case_id(line: str) -> str:
    return shlex.join(arguments(line))[:70]


def run_command(line: str, folder: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> str:
    """Run ``line`` in ``folder`` (after its :data:`PREREQUISITES`); its standard output."""
    from metricalc.cli import main

    monkeypatch.chdir(folder)
    command = shlex.join(arguments(line))
    for prefix, needs in PREREQUISITES.items():
        if (command + " ").startswith(prefix):
            for need in map(shlex.split, needs):
                if not _made(folder, need):
                    assert main(need) == 0, capsys.readouterr().err
    capsys.readouterr()
    try:
        status = main(arguments(line))
    except SystemExit as done:  # --version, --help
        status = done.code
    assert status == 0, capsys.readouterr().err
    return capsys.readouterr().out


def run_python_block(block: str, source: Path, namespace: dict[str, object] | None = None) -> dict:
    """Execute one example block; its namespace."""
    namespace = {} if namespace is None else namespace
    exec(compile(block, str(source), "exec"), namespace)  # fails if the example is stale
    return namespace


_FOLDERS: dict[Path, Path] = {}


def examples_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's folder of example inputs (module docstring), made on first use."""
    base = tmp_path_factory.getbasetemp()
    if base not in _FOLDERS:
        folder = tmp_path_factory.mktemp("examples")
        make_keypoint_inputs(folder)
        make_cubes(folder)
        write_trec_files(folder)
        make_patch_inputs(folder)
        make_database(folder)
        make_detections(folder)
        write_study(folder)
        _FOLDERS[base] = folder
    return _FOLDERS[base]


def workspace(
    tmp_path_factory: pytest.TempPathFactory, name: str, without: tuple[str, ...] = ()
) -> Path:
    """A folder of its own for some examples: a copy of the files of :func:`examples_folder`,
    its own copy of ``outputs/`` (the runs of ``metricalc run`` and the results database, so
    that one page's runs are not another's), links to its other folders; ``without`` these."""
    inputs = examples_folder(tmp_path_factory)
    folder = tmp_path_factory.mktemp(name)
    for entry in inputs.iterdir():
        if entry.name in without:
            continue
        if entry.name == "outputs":
            shutil.copytree(entry, folder / entry.name)
        elif entry.is_dir():
            (folder / entry.name).symlink_to(entry, target_is_directory=True)
        else:
            shutil.copy(entry, folder / entry.name)
    return folder


def make_cubes(folder: Path) -> None:
    """``locked.nc``, ``pessimistic.nc``, ``native.nc`` and ``both.nc`` (also in ``results/``)
    of the quick built-in benchmark ``data/synthetic``, 150 keypoints per image: SIFT, ORB and
    BRIEF locked on SIFT keypoints (under the ``expected`` and the ``pessimistic`` tie policy)
    and on their own keypoints; SIFT and RootSIFT. The same data as the cubes the examples'
    ``keypoints eval`` lines write over them, so that any two compare."""
    from metricalc import cube as qc
    from metricalc.keypoints.evaluate import evaluate
    from metricalc.keypoints.features import extract
    from metricalc.keypoints.sequences import load_sequences

    sequences = load_sequences(folder / "data" / "synthetic")
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
    both = extract(sequences, ("sift", "rootsift"), locked="sift", max_keypoints=150)
    qc.save(evaluate(sequences, both, keypoints="locked:sift", bojanic=False), folder / "both.nc")
    (folder / "results").mkdir(exist_ok=True)
    for name in ("locked", "both"):
        shutil.copy(folder / f"{name}.nc", folder / "results" / f"{name}.nc")
    shutil.copy(folder / "locked.nc", folder / "results.nc")


def write_trec_files(folder: Path) -> None:
    """``qrels.txt`` (graded judgments of 20 queries), the runs ``run.txt``, ``bm25.run``,
    ``dense.run`` and ``hybrid.run`` (50 scored documents per query, ties included) and
    ``prefs.txt`` (preferences of two judgment groups per query)."""
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
    # preferences of two assessors (judgment groups) per query, each in one sub-group
    rng = np.random.default_rng(1)
    prefs = [f"q{q} u{u} 0 d{d} {rng.integers(0, 3)}" for q in range(20) for u in range(2)
             for d in rng.choice(80, 10, replace=False)]
    (folder / "prefs.txt").write_text("\n".join(prefs) + "\n")


def make_keypoint_inputs(folder: Path) -> None:
    """The quick built-in benchmark ``data/synthetic`` (also as ``D``), SIFT's kept keypoints
    ``kps/`` (also as ``KPS/``) and an own descriptor on them, ``mine/`` (also ``MINE/``)."""
    from metricalc.cli import main
    from metricalc.keypoints import export_keypoints

    data = folder / "data" / "synthetic"
    assert main(["keypoints", "make-dataset", str(data), "--quick"]) == 0
    (folder / "D").symlink_to(data, target_is_directory=True)
    export_keypoints(data, folder / "kps", detector="sift")
    rng = np.random.default_rng(0)
    for path in (folder / "kps").glob("*/*.npz"):
        keypoints = np.load(path)["keypoints"]
        out = folder / "mine" / path.relative_to(folder / "kps")
        out.parent.mkdir(parents=True, exist_ok=True)
        np.savez(out, keypoints=keypoints, descriptors=rng.random((len(keypoints), 16)))
    (folder / "KPS").symlink_to(folder / "kps", target_is_directory=True)
    (folder / "MINE").symlink_to(folder / "mine", target_is_directory=True)


def make_patch_inputs(folder: Path) -> None:
    """The quick synthetic patches ``data/patches``, a benchmark ``bench/``, raw-pixel
    descriptors and their results (``desc/``, ``results/``), and the real benchmark file
    ``train_easy_5s_00`` with shuffled oracle results as ``B.*``, ``b.*`` and
    ``train_easy_5s_00.*`` (results also in ``sift/`` and ``results/retrieval/my_desc/``), and
    the folder of the real files, ``hpatches-eccv2016-retrieval``."""
    from metricalc.benchmarks import hpatches_patches as mp
    from metricalc.cli import main
    from tests.benchmarks.hpatches_patches.test_patch_evaluation import real, shuffled_results

    def run(*argv: str) -> None:
        assert main(list(argv)) == 0

    patches = str(folder / "data" / "patches")
    run("patches", "make-dataset", patches, "--quick")
    run("patches", "make-benchmark", "--patches", patches, "--split", "train", "--sequences",
        "2", "--seed", "0", "--difficulty", "hard", "--out", str(folder / "bench"))
    benchmark = str(folder / "bench" / "train_hard_2s_00.benchmark")
    for method in ("sift", "raw"):  # raw pixels for both: describing with sift takes seconds
        run("patches", "describe", "--patches", patches, "--method", "raw",
            "--out", str(folder / "desc" / method))
        run("patches", "compute", "--benchmark", benchmark, "--descriptors",
            str(folder / "desc" / method), "--out",
            str(folder / "results" / method / "train_hard_2s_00.results"))
    name = "train_easy_5s_00"
    benchmark_, labels = real(name)
    results = shuffled_results(benchmark_, labels, seed=0)
    (folder / "sift").mkdir()
    for stem in ("B", "b", name):
        shutil.copy(DATA / "hpatches-eccv2016-retrieval" / f"{name}.benchmark",
                    folder / f"{stem}.benchmark")
        shutil.copy(DATA / "hpatches-eccv2016-retrieval" / f"{name}.labels",
                    folder / f"{stem}.labels")
    (folder / "hpatches-eccv2016-retrieval").symlink_to(DATA / "hpatches-eccv2016-retrieval")
    mine = folder / "results" / "retrieval" / "my_desc" / f"{name}.results"
    mine.parent.mkdir(parents=True)
    for path in (folder / "R.results", folder / "b.results", folder / "sift" / f"{name}.results",
                 mine):
        mp.write_results(path, results.pool, results.results)


def make_database(folder: Path) -> None:
    """The real DescriptorWorkbench export ``descriptor_performance_analysis.csv``, imported
    into the default database ``outputs/metricalc.sqlite`` with its per-scene cube ``cube.nc``
    (also ``wb.nc``)."""
    from metricalc.cli import main

    csv = folder / "descriptor_performance_analysis.csv"
    shutil.copy(DATA / "descriptorworkbench-export" / csv.name, csv)
    database = folder / "outputs" / "metricalc.sqlite"
    argv = ["db", "import-workbench", str(csv), "--db", str(database)]
    assert main([*argv, "--out", str(folder / "cube.nc")]) == 0
    shutil.copy(folder / "cube.nc", folder / "wb.nc")


def make_detections(folder: Path) -> None:
    """COCO-style ground truth ``gt.json`` and detections ``results.json`` (with masks), and
    ``results_b.json``: another detector on the same images (more wrong classes)."""
    from metricalc.benchmarks.coco.generator import make_coco_dataset

    options = {"n_images": 12, "n_categories": 3, "segm": True, "crowd_rate": 0.1, "seed": 7}
    gt, dt = make_coco_dataset(**options)
    _, other = make_coco_dataset(**options, wrong_class_rate=0.4)
    (folder / "gt.json").write_text(json.dumps(gt))
    (folder / "results.json").write_text(json.dumps(dt))
    (folder / "results_b.json").write_text(json.dumps(other))


def write_study(folder: Path) -> None:
    """``my_study.yaml``: the study of a user, on the cube ``locked.nc``."""
    (folder / "my_study.yaml").write_text(
        "title: My study\ndata:\n  cube: locked.nc\nbaseline: sift\n"
    )
