"""Study specifications: the YAML files of ``reports/`` that ``metricalc report`` renders.

A study names its data (a cube file, several labelled cube files, a dataset plus descriptors, or
an experiment tag), the table columns, the baseline, the tests and the outputs. :func:`load_study`
reads and validates one; every error names the file and the key. docs/report.md lists every key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from metricalc.datasets.reported import ReportedResult, select_reported
from metricalc.errors import InvalidInputError
from metricalc.fileio import path_inside
from metricalc.stats import CORRECTIONS, INTERVALS, PAIR_BY, TESTS  # a study's tests.* choices
from metricalc.stats.bootstrap import check_bootstrap_memory
from metricalc.validation import (
    TIE_POLICIES,
    Boolean,
    Integer,
    is_integer,
    is_real,
    validate_params,
)

__all__ = [
    "BUILTIN_DESCRIPTORS",
    "CORRECTIONS",
    "DEFAULT_DESCRIPTORS",
    "DEMO_LOCKED",
    "DEMO_NAMES",
    "DEMO_NATIVE",
    "FIGURES",
    "OUTPUTS",
    "PAIR_BY",
    "RANK_BY",
    "TESTS",
    "DataSpec",
    "Study",
    "TestSpec",
    "demo_study",
    "load_study",
    "study_from_dict",
]

FIGURES = (
    "map_by_split",
    "split_scatter",
    "scene_map",
    "rank_histogram",
    "pr_curves",
    "roc",
    "mma",
    "forest",
    "cd_diagram",
    "detector_or_descriptor",
)
"""Figure names, in the order of the report (``detector_or_descriptor`` is the figure of the
decomposition section, :func:`metricalc.report.sections.detector_or_descriptor_section`)."""
OUTPUTS = ("html", "latex", "markdown", "csv", "summary", "figures")
"""Output names: report.html, tables.tex, tables.md, comparisons.csv (+ table.csv and
metrics.csv), summary.txt, figures/ (PNG + SVG)."""

BUILTIN_DESCRIPTORS = (
    "sift", "rootsift", "dspsift", "orb", "brief", "brisk", "akaze", "kaze", "raw_patch",
)  # fmt: skip
"""The built-in methods a study's ``data.descriptors`` may name
(:data:`metricalc.keypoints.features.BUILTIN_METHODS`, spelled here so that reading a study does
not import OpenCV; a test checks they agree)."""
DEFAULT_DESCRIPTORS = ("sift", "rootsift", "orb", "brief")
"""``data.descriptors`` when a study names none
(:data:`metricalc.keypoints.features.DEFAULT_METHODS`)."""

RANK_BY = ("pair", "scene")
"""Blocks of the Friedman test and the Nemenyi CD (``tests.rank_by``): scenes or image pairs
(docs/stats.md, after Demsar 2006); single queries would give a CD of hundredths."""


@dataclass(frozen=True)
class DataSpec:
    """Where the cubes of a study come from (exactly one ``kind``).

    - ``"cube"``: ``cubes`` maps labels to cube files; a single file has the label ``""``;
    - ``"dataset"``: ``dataset`` is ``"synthetic"`` (the built-in benchmark, written to
      ``root``) or a folder of HPatches sequences; ``keypoints`` maps labels to ``"native"`` or
      ``"locked:<detector>"`` (one entry with label ``""`` for a single cube);
    - ``"experiment"``: the tags of ``metricalc run`` runs (``experiments``) of ``benchmark``
      below ``outputs`` (None: ``outputs/`` of the current directory, as ``metricalc run``).
    """

    kind: str
    cubes: Mapping[str, Path] = field(default_factory=dict)
    dataset: str = ""
    root: Path | None = None
    scenes: tuple[str, ...] | None = None
    descriptors: tuple[str, ...] = DEFAULT_DESCRIPTORS
    keypoints: Mapping[str, str] = field(default_factory=lambda: {"": "locked:sift"})
    tau: float = 3.0
    border: float = 40.0
    tie_policy: str = "expected"
    bojanic: bool = True
    seed: int = 0
    experiments: tuple[str, ...] = ()
    benchmark: str = "hpatches"
    outputs: Path | None = None

    @property
    def labels(self) -> list[str]:
        """The labels of the cubes ([""] for a single unlabelled cube)."""
        return list(self.cubes if self.kind == "cube" else self.keypoints)


@dataclass(frozen=True)
class TestSpec:
    """Settings of :func:`metricalc.stats.compare` and :func:`metricalc.stats.rank_systems`."""

    __test__ = False  # not a pytest test class

    test: str = "auto"
    correction: str = "holm"
    alpha: float = 0.05
    pair_by: str = "scene"
    confidence_level: float = 0.95
    interval: str = "auto"
    n_resamples: int = 10_000
    seed: int = 0
    rank: bool = True
    rank_by: str = "scene"


@dataclass(frozen=True)
class Study:
    """A validated study specification (:func:`load_study`)."""

    name: str
    data: DataSpec
    title: str = ""
    description: str = ""
    names: Mapping[str, str] = field(default_factory=dict)
    metrics: tuple[str, ...] | None = None
    decimals: int = 1
    baseline: str | None = None
    tests: TestSpec = field(default_factory=TestSpec)
    figures: tuple[str, ...] = FIGURES
    outputs: tuple[str, ...] = OUTPUTS
    source: Path | None = None
    reported: tuple[ReportedResult, ...] = ()

    def default_out(self) -> Path:
        """The study folder ``<folder of the YAML file>/<study name>`` (``reports/<study>/``):
        the study's data (benchmark, cube cache), and its report in ``report/``."""
        base = self.source.parent if self.source is not None else Path("reports")
        return base / self.name


# ----------------------------------------------------------------------------------------------
# validation helpers: each raises naming the file and the key
# ----------------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> InvalidInputError:
        return InvalidInputError(f"{self.source}: {key}: {message}")

    def mapping(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise self.fail(key, f"expected a mapping of names to values; got {value!r}")
        return value

    def keys(self, value: dict[str, Any], key: str, allowed: tuple[str, ...]) -> None:
        unknown = [k for k in value if k not in allowed]
        if unknown:
            where = f"{key}.{unknown[0]}" if key else unknown[0]
            raise self.fail(where, f"unknown key; expected one of {', '.join(allowed)}")

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string; got {value!r}")
        return value

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(key, f"expected one of {', '.join(choices)}; got {value!r}")
        return str(value)

    def number(
        self, value: Any, key: str, *, low: float, high: float, open_low: bool = False
    ) -> float:
        ok = is_real(value)
        if not ok or not math.isfinite(value) or value > high or value < low:
            ok = False
        if ok and open_low and value == low:
            ok = False
        if not ok:
            bracket = "(" if open_low else "["
            raise self.fail(key, f"expected a number in {bracket}{low:g}, {high:g}]; got {value!r}")
        return float(value)

    def integer(self, value: Any, key: str, *, low: int, high: int | None = None) -> int:
        if not is_integer(value) or value < low:
            raise self.fail(key, f"expected an integer >= {low}; got {value!r}")
        if high is not None and value > high:
            raise self.fail(key, f"expected an integer <= {high}; got {value!r}")
        return int(value)

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false; got {value!r}")
        return value

    def strings(self, value: Any, key: str, *, choices: tuple[str, ...] = ()) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value:
            raise self.fail(key, f"expected a non-empty list of names; got {value!r}")
        for i, item in enumerate(value):
            self.string(item, f"{key}[{i}]")
            if choices and item not in choices:
                raise self.fail(
                    f"{key}[{i}]", f"expected one of {', '.join(choices)}; got {item!r}"
                )
        if len(set(value)) != len(value):
            raise self.fail(key, f"names repeat: {value}")
        return tuple(value)


def _keypoint_mode(check: _Checker, value: Any, key: str) -> str:
    mode = check.string(value, key)
    if mode != "native" and not (mode.startswith("locked:") and len(mode) > len("locked:")):
        raise check.fail(key, f"expected 'native' or 'locked:<detector>'; got {mode!r}")
    return mode


def _labels(check: _Checker, value: dict[str, Any], key: str) -> None:
    for label in value:
        if not label.strip() or "(" in label or ")" in label:
            raise check.fail(f"{key}.{label}", "a label must be non-empty, without parentheses")


def _cube_data(check: _Checker, raw: dict[str, Any], base: Path, kind: str) -> DataSpec:
    """``data: {cube: FILE}`` or ``data: {cubes: {label: FILE}}``: existing cube files."""
    check.keys(raw, "data", (kind,))
    if kind == "cube":
        cubes = {"": base / check.string(raw["cube"], "data.cube")}
    else:
        mapping = check.mapping(raw["cubes"], "data.cubes")
        if not mapping:
            raise check.fail("data.cubes", "expected at least one label: cube file")
        _labels(check, mapping, "data.cubes")
        cubes = {
            label: base / check.string(path, f"data.cubes.{label}")
            for label, path in mapping.items()
        }
    for label, path in cubes.items():
        if not path.is_file():
            key = f"data.cubes.{label}" if label else "data.cube"
            raise check.fail(key, f"cube file {path} does not exist")
    return DataSpec(kind="cube", cubes=cubes)


def _experiment_data(check: _Checker, raw: dict[str, Any], base: Path) -> DataSpec:
    """``data: {experiment: TAG(S), benchmark, outputs}``: recorded runs."""
    from metricalc.experiment.config import check_tag

    check.keys(raw, "data", ("experiment", "benchmark", "outputs"))
    outputs = raw.get("outputs")
    named = {"data.benchmark": check.string(raw.get("benchmark", "hpatches"), "data.benchmark")}
    named.update(
        (f"data.experiment[{i}]", tag)
        for i, tag in enumerate(check.strings(raw["experiment"], "data.experiment"))
    )
    for key, name in named.items():  # folder names under the outputs, never paths
        try:
            check_tag(name, "a tag" if key != "data.benchmark" else "a benchmark")
        except InvalidInputError as error:
            raise check.fail(key, str(error)) from None
    return DataSpec(
        kind="experiment",
        experiments=tuple(named[k] for k in named if k != "data.benchmark"),
        benchmark=named["data.benchmark"],
        outputs=base / check.string(outputs, "data.outputs") if outputs is not None else None,
    )


def _dataset_folder(check: _Checker, raw: dict[str, Any], base: Path) -> str:
    """``data.dataset``: ``synthetic`` or an existing folder of sequences (relative to ``base``)."""
    dataset = check.string(raw["dataset"], "data.dataset")
    if dataset == "synthetic":
        return dataset
    folder = base / dataset
    if not folder.is_dir():
        raise check.fail(
            "data.dataset",
            f"expected 'synthetic' (the built-in benchmark) or a folder of HPatches "
            f"sequences; {folder} is not a folder",
        )
    return str(folder)


def _keypoint_modes(check: _Checker, keypoints: Any) -> dict[str, str]:
    """``data.keypoints``: one mode, or a mode per label (label ``""`` for one mode)."""
    if not isinstance(keypoints, dict):
        return {"": _keypoint_mode(check, keypoints, "data.keypoints")}
    check.mapping(keypoints, "data.keypoints")
    if not keypoints:
        raise check.fail("data.keypoints", "expected at least one label: mode")
    _labels(check, keypoints, "data.keypoints")
    return {
        label: _keypoint_mode(check, mode, f"data.keypoints.{label}")
        for label, mode in keypoints.items()
    }


def _dataset_data(check: _Checker, raw: dict[str, Any], base: Path) -> DataSpec:
    """``data: {dataset: ..., descriptors, keypoints, ...}``: cubes computed from images."""
    allowed = (
        "dataset", "root", "scenes", "descriptors", "keypoints", "tau", "border", "tie_policy",
        "bojanic", "seed",
    )  # fmt: skip
    check.keys(raw, "data", allowed)
    dataset = _dataset_folder(check, raw, base)
    modes = _keypoint_modes(check, raw.get("keypoints", "locked:sift"))
    descriptors = check.strings(
        raw.get("descriptors", list(DEFAULT_DESCRIPTORS)), "data.descriptors",
        choices=BUILTIN_DESCRIPTORS,
    )  # fmt: skip
    root = raw.get("root")
    return DataSpec(
        kind="dataset",
        dataset=dataset,
        root=(
            path_inside(base, check.string(root, "data.root"), f"{check.source}: data.root")
            if root is not None
            else None
        ),
        scenes=check.strings(raw["scenes"], "data.scenes") if "scenes" in raw else None,
        descriptors=descriptors,
        keypoints=modes,
        tau=check.number(raw.get("tau", 3.0), "data.tau", low=0, high=1e6, open_low=True),
        border=check.number(raw.get("border", 40.0), "data.border", low=0, high=1e6),
        tie_policy=check.choice(raw.get("tie_policy", "expected"), "data.tie_policy", TIE_POLICIES),
        bojanic=check.boolean(raw.get("bojanic", True), "data.bojanic"),
        seed=check.integer(raw.get("seed", 0), "data.seed", low=0),
    )


def _data(check: _Checker, raw: Any, base: Path) -> DataSpec:
    """The ``data`` block of a study: exactly one of cube(s), experiment, dataset."""
    raw = check.mapping(raw, "data")
    sources = [k for k in ("cube", "cubes", "dataset", "experiment") if k in raw]
    if len(sources) != 1:
        raise check.fail(
            "data",
            "give exactly one of cube (a cube file), cubes (labelled cube files), dataset "
            f"(with descriptors) or experiment (a tag); got {sources or 'none'}",
        )
    kind = sources[0]
    if kind in ("cube", "cubes"):
        return _cube_data(check, raw, base, kind)
    if kind == "experiment":
        return _experiment_data(check, raw, base)
    return _dataset_data(check, raw, base)


def _tests(check: _Checker, raw: Any) -> TestSpec:
    if raw is None:
        return TestSpec()
    raw = check.mapping(raw, "tests")
    check.keys(
        raw,
        "tests",
        (
            "test",
            "correction",
            "alpha",
            "pair_by",
            "confidence_level",
            "interval",
            "n_resamples",
            "seed",
            "rank",
            "rank_by",
        ),
    )
    n_resamples = check.integer(raw.get("n_resamples", 10_000), "tests.n_resamples", low=99)
    try:  # refused now, not after the evaluation: the bootstrap of one comparison must fit
        check_bootstrap_memory(1, n_resamples)
    except InvalidInputError as error:
        raise check.fail("tests.n_resamples", str(error)) from None
    return TestSpec(
        test=check.choice(raw.get("test", "auto"), "tests.test", TESTS),
        correction=check.choice(raw.get("correction", "holm"), "tests.correction", CORRECTIONS),
        alpha=check.number(raw.get("alpha", 0.05), "tests.alpha", low=0, high=0.5, open_low=True),
        pair_by=check.choice(raw.get("pair_by", "scene"), "tests.pair_by", PAIR_BY),
        confidence_level=check.number(
            raw.get("confidence_level", 0.95), "tests.confidence_level", low=0.5, high=0.999
        ),
        interval=check.choice(raw.get("interval", "auto"), "tests.interval", INTERVALS),
        n_resamples=n_resamples,
        seed=check.integer(raw.get("seed", 0), "tests.seed", low=0),
        rank=check.boolean(raw.get("rank", True), "tests.rank"),
        rank_by=check.choice(raw.get("rank_by", "scene"), "tests.rank_by", RANK_BY),
    )


def _reported(check: _Checker, raw: Any) -> tuple[ReportedResult, ...]:
    """``reported``: published numbers by key, key pattern or filter
    (:func:`metricalc.datasets.reported.select_reported`)."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise check.fail("reported", "expected a non-empty list of keys or filters; got []")
    for i, item in enumerate(items):
        if isinstance(item, dict):
            for field, value in check.mapping(item, f"reported[{i}]").items():
                check.string(value, f"reported[{i}].{field}")
        else:
            check.string(item, f"reported[{i}]")
    try:
        return select_reported(items)
    except InvalidInputError as error:
        raise check.fail("reported", str(error).removeprefix("reported: ")) from None


def study_from_dict(raw: Any, *, source: str | Path, name: str | None = None) -> Study:
    """Validate a parsed study specification (a dict, as from YAML).

    ``source`` names the file in error messages; relative paths in ``data`` are resolved
    against its folder. ``name`` defaults to the file stem.
    """
    source_path = Path(source)
    check = _Checker(str(source))
    if not isinstance(raw, dict):
        raise check.fail("(top level)", f"expected a mapping of keys; got {type(raw).__name__}")
    check.keys(
        raw,
        "",
        ("title", "description", "data", "names", "metrics", "decimals", "baseline", "tests",
         "figures", "outputs", "reported"),
    )  # fmt: skip
    if "data" not in raw:
        raise check.fail("data", "missing; every study names its data")
    data = _data(check, raw["data"], source_path.parent)
    names = check.mapping(raw.get("names", {}) or {}, "names")
    for key, value in names.items():
        check.string(value, f"names.{key}")
    baseline = raw.get("baseline")
    if baseline is not None:
        baseline = check.string(baseline, "baseline")
    return Study(
        name=name or source_path.stem,
        data=data,
        title=check.string(raw["title"], "title").strip() if "title" in raw else "",
        description=(
            check.string(raw["description"], "description").strip() if "description" in raw else ""
        ),
        names={str(k): str(v) for k, v in names.items()},
        metrics=check.strings(raw["metrics"], "metrics") if "metrics" in raw else None,
        decimals=check.integer(raw.get("decimals", 1), "decimals", low=0, high=6),
        baseline=baseline,
        tests=_tests(check, raw.get("tests")),
        figures=(
            check.strings(raw["figures"], "figures", choices=FIGURES)
            if "figures" in raw
            else FIGURES
        ),
        outputs=(
            check.strings(raw["outputs"], "outputs", choices=OUTPUTS)
            if "outputs" in raw
            else OUTPUTS
        ),
        source=source_path,
        reported=_reported(check, raw["reported"]) if "reported" in raw else (),
    )


def load_study(path: str | Path) -> Study:
    """Read and validate a study specification (YAML).

    Raises
    ------
    InvalidInputError
        A missing file, a YAML syntax error (with its line), an unknown key, a value of the
        wrong type or out of range, a missing cube file or dataset folder; the message names the
        file and the key (``reports/x.yaml: tests.alpha: expected a number in (0, 0.5]; got 2``).

    Examples
    --------
    The same checks on a parsed spec (:func:`study_from_dict`):

    >>> study_from_dict({"data": {"dataset": "synthetic"}, "tests": {"alpha": 2}},
    ...                 source="reports/x.yaml")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: reports/x.yaml: tests.alpha: expected a number in (0, 0.5]; got 2
    """  # noqa: E501
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such study file (expected a YAML file)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise InvalidInputError(f"{path}: {where}: not valid YAML: {error.problem}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        reason = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        raise InvalidInputError(f"{path}: not valid YAML: {reason}") from None
    return study_from_dict(raw, source=path)


DEMO_NAMES = {
    "sift": "SIFT",
    "rootsift": "RootSIFT",
    "dspsift": "DSP-SIFT",
    "orb": "ORB",
    "brief": "BRIEF",
    "brisk": "BRISK",
    "akaze": "AKAZE",
    "kaze": "KAZE",
    "raw_patch": "Raw patch",
}
"""Display names of the built-in methods in the demo's report."""
DEMO_LOCKED = ("sift", "rootsift", "dspsift", "orb", "brief", "raw_patch")
"""The methods ``metricalc demo`` describes SIFT's keypoints with (its report's study): the
descriptors whose order on real data the built-in benchmark should reproduce. BRISK, AKAZE and
KAZE are left out of it: they would cost the demo a third more time, BRISK would drop keypoints
for every method, and they are at their best on their own detectors (``DEMO_NATIVE``)."""
DEMO_NATIVE = ("sift", "orb", "brief", "akaze")
"""The methods ``metricalc demo`` runs on their own detectors: the distinct detectors (RootSIFT,
DSP-SIFT and the raw patch would repeat the locked run on SIFT's keypoints) but BRISK and
KAZE, the slow ones (``benchmarks/bench_descriptors.py``: KAZE's nonlinear scale space costs
about 4 SIFT extractions per image, BRISK's 37,000 keypoints per image pair triple SIFT's
evaluation time). AKAZE is run when this OpenCV has it."""


@validate_params(quick=Boolean(), seed=Integer(0))
def demo_study(*, quick: bool = False, seed: int = 0) -> Study:
    """The study ``metricalc demo`` renders (``reports/demo.yaml`` holds the same spec): the
    built-in descriptors on the built-in benchmark, locked on SIFT keypoints, paired per query,
    every descriptor against SIFT, ranked over scenes (image pairs for ``quick``)."""
    from metricalc.datasets.sequences import QUICK_SCENES

    study = Study(
        name="demo",
        title="Built-in descriptors on the built-in benchmark",
        description=(
            "SIFT, RootSIFT, DSP-SIFT, ORB, BRIEF and a raw-patch baseline described on the same "
            "SIFT keypoints of the synthetic HPatches-style benchmark, so every query is paired "
            "across descriptors."
        ),
        data=DataSpec(
            kind="dataset",
            dataset="synthetic",
            scenes=tuple(QUICK_SCENES) if quick else None,
            descriptors=DEMO_LOCKED,
            keypoints={"": "locked:sift"},
            seed=seed,
        ),
        names=DEMO_NAMES,
        baseline="sift",
    )
    # --quick has 4 scenes (2 per split), too few blocks for a Friedman test: rank image pairs
    blocks = "pair" if quick else "scene"
    return replace(study, tests=replace(study.tests, seed=seed, rank_by=blocks))
