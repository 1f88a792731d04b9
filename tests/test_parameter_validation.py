"""Every public function refuses every invalid option with a one-line error naming it.

The public functions are those of ``metricalc.__all__`` and of the ``__all__`` of each public
subpackage. Their options are declared with :func:`metricalc.validation.validate_params`
(docs/architecture.md, "Validating parameters"); for each declared parameter and each value its
constraint refuses (:meth:`~metricalc.validation.Constraint.invalid_values`), the function is
called with otherwise valid arguments and must raise :class:`~metricalc.errors.InvalidInputError`
naming the parameter. A public function's option (a parameter with a number, string or bool
default) must be declared, and so must some option of a function with keyword-only arguments,
unless :data:`UNDECLARED` lists the function with the reason.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np
import pytest
import skimage.data
import xarray as xr

from metricalc.benchmarks.coco import load_detections, load_ground_truth
from metricalc.benchmarks.hpatches_patches import Results, read_benchmark, read_labels
from metricalc.cube import DEFAULT_ATTRS, new_cube
from metricalc.datasets import make_coco_dataset
from metricalc.decompose import decompose
from metricalc.decompose.chain import COUNT_VARIABLES
from metricalc.errors import InvalidInputError
from metricalc.keypoints import EvaluationSettings, extract
from metricalc.report import demo_study
from metricalc.stats import compare
from metricalc.validation import (
    Boolean,
    Choice,
    Constraint,
    Fraction,
    Function,
    Integer,
    ListOf,
    Nullable,
    OneOf,
    Real,
    Text,
    param_constraints,
    validate_params,
)
from tests.light_core_calls import BETTER, COUNTS, TIES, Y_SCORE, Y_TRUE, small_cube

RETRIEVAL = Path(__file__).parent / "data" / "hpatches-eccv2016-retrieval"

PACKAGES = (
    "metricalc",
    "metricalc.cube",
    "metricalc.metrics",
    "metricalc.stats",
    "metricalc.keypoints",
    "metricalc.benchmarks.hpatches_patches",
    "metricalc.benchmarks.coco",
    "metricalc.benchmarks.twoview",
    "metricalc.decompose",
    "metricalc.datasets",
    "metricalc.report",
    "metricalc.plotting",
)

_CAPTION = "names (display names) and metric_phrase: free text for the figure or sentence"
UNDECLARED: dict[str, str] = {
    "metricalc.keypoints.image_features": "features: your features' folder, read as given (a "
    "missing file is named when it is read)",
    "metricalc.matching_counts": "sequences: a split name or a list, checked against the cube's "
    "sequences (metricalc.hpatches.select_sequences)",
    "metricalc.cube.error_record": "attrs: a cube's protocol attrs, checked by cube.validate",
    "metricalc.cube.from_dataframe": "attrs and tie_policy are checked once merged with the "
    "frame's columns (either may give the tie policy)",
    "metricalc.cube.open_cube": "chunks: passed to xarray and dask as given",
    "metricalc.stats.direction": "mean_diff, rank_biserial, wins, losses: a test's results "
    "(NaN allowed), not options",
    "metricalc.stats.untestable": "test: the test compare resolved; paired_test declares it",
    "metricalc.keypoints.load_features": "descriptors: checked against the folders found",
    "metricalc.keypoints.load_sequences": "scenes and split: checked against the dataset's folders",
    "metricalc.benchmarks.twoview.evaluate_pairs": "settings is a PoseSettings, checked when "
    "built; ratio, "
    "thresholds and seeds are checked with the matching step",
    "metricalc.decompose.chain_counts": "stages, counted, found_at, batch_dims, coords: arrays "
    "and names checked against the shape of the outcomes",
    "metricalc.report.describe_ranking": _CAPTION,
    "metricalc.report.plot_cd_diagram": _CAPTION,
    "metricalc.report.plot_forest": _CAPTION,
    **{f"metricalc.plotting.{name}": _CAPTION for name in (
        "plot_map_by_split", "plot_mma", "plot_pr_curves", "plot_rank_histogram", "plot_roc",
        "plot_scene_map", "plot_split_scatter",
    )},
}
"""Public functions with keyword-only arguments and no declaration -> why (their keyword-only
arguments are data, names or objects checked where they are used); ``"function(option)"``
would exempt one option with a number, string or bool default (none is)."""


@cache
def public_functions() -> dict[str, Callable[..., Any]]:
    """``package.name`` -> each public function, once (the first package exporting it)."""
    found: dict[str, Callable[..., Any]] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value) and value not in found.values():
                found[f"{package}.{name}"] = value
    return found


def options(function: Callable[..., Any]) -> list[str]:
    """The parameters of ``function`` with a number, string or bool default: its options."""
    return [
        p.name
        for p in inspect.signature(function).parameters.values()
        if isinstance(p.default, str | int | float | bool)
    ]


# Valid arguments, by parameter name: a function's required parameters are filled from here
# (``BY_FUNCTION`` first) so that only the declared parameter under test is invalid.
BY_NAME: dict[str, Callable[[], Any]] = {
    "y_true": lambda: Y_TRUE,
    "y_score": lambda: Y_SCORE,
    "counts": lambda: COUNTS,
    "better": lambda: BETTER,
    "ties": lambda: TIES,
    "x": lambda: [0.0, 0.5, 1.0],
    "y": lambda: [0.0, 1.0, 1.0],
    "distances": lambda: np.array([[0.1, 0.5, 0.3]]),
    "relevant_index": lambda: np.array([2]),
    "cube": small_cube,
    "differences": lambda: np.array([0.1, -0.2, 0.3, 0.4, 0.05]),
    "pvalues": lambda: np.array([0.01, 0.04]),
    "rng": lambda: np.random.default_rng(0),
    "errors": lambda: np.array([0.0, 2.0, np.inf, 30.0]),
    "precision": lambda: np.array([1.0, 0.5]),
    "recall": lambda: np.array([0.5, 1.0]),
    "threshold": lambda: 3.0,
    "k": lambda: 3,
    "n": lambda: 20,
    "confidence": lambda: [0.9, 0.8, 0.7, 0.6],
    "outcomes": lambda: [[1, 1], [1, 0], [0, 0], [1, 1]],
    "n_ground_truth": lambda: 3,
    "curves": lambda: chain(),
    "improved": lambda: chain(),
    "chains": lambda: [chain(), chain()],
    "dim": lambda: "run",
    "ap": lambda: xr.DataArray([0.5, 0.7], dims="category"),
    "T_0to1": lambda: np.eye(4),
    "R": lambda: np.eye(3),
    "t": lambda: np.array([1.0, 0.0, 0.0]),
    "t_est": lambda: np.array([1.0, 0.0, 0.0]),
    "t_gt": lambda: np.array([0.0, 1.0, 0.0]),
    "results": lambda: xr.Dataset(
        {"pose_error": (("descriptor", "pair"), [[1.0, 3.0]]),
         "success": (("descriptor", "pair"), [[1.0, 1.0]])},
        coords={"descriptor": ["sift"]},
    ),
    "sequences": lambda: [scene()],
    "data": lambda: [scene()],
    "features": lambda: extract([scene()], "sift", max_keypoints=20),
    "gray": lambda: scene().gray(1),
    "points": lambda: np.array([[32.0, 32.0]]),
    "sizes": lambda: np.array([8.0]),
    "angles": lambda: np.array([0.0]),
    "benchmark": lambda: read_benchmark(RETRIEVAL / "train_easy_5s_00.benchmark"),
    "labels": lambda: read_labels(RETRIEVAL / "train_easy_5s_00.labels"),
    "benchmark_path": lambda: RETRIEVAL / "train_easy_5s_00.benchmark",
    "labels_path": lambda: RETRIEVAL / "train_easy_5s_00.labels",
    "descriptors": lambda: ["a"],
    "query_coords": lambda: {"scene": ["i_a"], "pair": ["1-2"], "keypoint_set": ["a"],
                             "query_keypoint": [0]},
    "attrs": lambda: DEFAULT_ATTRS,
    "comparison": lambda: comparison(),
    "descriptor": lambda: "a",
    "baseline": lambda: "b",
    "study": lambda: demo_study(quick=True),
    "gt": lambda: coco()[0],
    "descriptors0": lambda: np.eye(3, 4, dtype=np.float32),
    "descriptors1": lambda: np.eye(3, 4, dtype=np.float32),
    "settings": lambda: EvaluationSettings(("sift",), "locked:sift"),
    "locked": lambda: EvaluationSettings(("sift",), "locked:sift"),
    "native": lambda: EvaluationSettings(("sift",), "native"),
    "dt": lambda: coco()[1],
}
BY_FUNCTION: dict[str, dict[str, Callable[[], Any]]] = {
    "metricalc.benchmarks.hpatches_patches.evaluate_results": {"results": lambda: oracle_results()},
    "metricalc.benchmarks.hpatches_patches.relevance": {"results": lambda: oracle_results()},
    "metricalc.benchmarks.hpatches_patches.evaluate_folders": {"results": lambda: ["sift"]},
    "metricalc.keypoints.cube_from_pairs": {
        "name": lambda: "sift", "pairs": lambda: [], "keypoint_set": lambda: "sift",
        "processing_time_ms": lambda: 0.0,
    },
    "metricalc.cube.new_cube": {"data": lambda: {"better": [[0]], "ties": [[0]]}},
    "metricalc.benchmarks.hpatches_patches.make_benchmark": {
        "split": lambda: "train", "n_sequences": lambda: 2, "seed": lambda: 0,
        "difficulty": lambda: "easy",
    },
    "metricalc.decompose.factor_curves": {
        "counts": lambda: chain()[[*COUNT_VARIABLES, "n_ground_truth"]]
    },
}


@cache
def chain() -> xr.Dataset:
    """Factor curves of a two-stage chain of four predictions."""
    return decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)


@cache
def scene() -> SimpleNamespace:
    """A sequence of six copies of a 96 x 96 photograph (identity homographies)."""
    gray = cv2.resize(skimage.data.camera(), (96, 96))
    return SimpleNamespace(
        name="i_camera", gray=lambda k: gray, shape=lambda k: gray.shape,
        homography=lambda k: np.eye(3),
    )


def oracle_results() -> Results:
    """Results of the benchmark in ``BY_NAME`` that rank each query first."""
    benchmark = BY_NAME["benchmark"]()
    return Results(benchmark.pool, tuple((query,) for query in benchmark.queries))


@cache
def comparison() -> xr.Dataset:
    """Descriptor ``a`` compared with ``b`` on eight scenes."""
    better = np.array([[0, 1, 0, 2, 0, 0, 1, 0], [1, 3, 2, 2, 4, 1, 3, 2]])
    cube = new_cube(
        ["a", "b"],
        {"scene": [f"i_{s}" for s in "abcdefgh"], "pair": ["1-2"] * 8,
         "keypoint_set": ["a"] * 8, "query_keypoint": list(range(8))},
        {"better": better, "ties": np.zeros_like(better)},
        attrs=DEFAULT_ATTRS,
    )
    return compare(cube, n_resamples=99)


@cache
def coco() -> tuple[Any, Any]:
    """A COCO ground truth of two images and its detections."""
    gt_dict, dt_list = make_coco_dataset(n_images=2, n_categories=2, seed=0)
    gt = load_ground_truth(gt_dict)
    return gt, load_detections(dt_list, gt)


PATHS = ("root", "out", "path", "dataset", "benchmarks", "results_path", "cache")
"""Parameters naming a file or folder to read or write: given a path in the test's temporary
folder (the refused call must not have touched it)."""


@cache
def valid(qualname: str, name: str) -> Any:
    """A valid ``name`` argument of the function ``qualname``, built once."""
    known = BY_FUNCTION.get(qualname, {}).get(name) or BY_NAME.get(name)
    assert known is not None, f"add a valid {name} for {qualname} to BY_NAME"
    return known()


def call_with(
    qualname: str, function: Callable[..., Any], name: str, value: object, folder: Path
) -> None:
    """Call ``function`` with valid required arguments and ``name=value``."""
    parameters = inspect.signature(function).parameters.values()
    kwargs: dict[str, Any] = {
        p.name: folder / p.name for p in parameters if p.name in PATHS and p.default is p.empty
    }
    for parameter in parameters:
        if (
            parameter.name in (name, *kwargs)
            or parameter.default is not parameter.empty
            or (parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD))
        ):
            continue
        kwargs[parameter.name] = valid(qualname, parameter.name)
    kwargs[name] = value
    function(**kwargs)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty folder for the paths of :data:`PATHS` (it stays empty: no call may run)."""
    return tmp_path_factory.mktemp("calls")


def value_id(value: object) -> str:
    """``repr(value)``, or its type's name where the repr holds a memory address (the ids must be
    the same in every pytest-xdist worker)."""
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text


def cases() -> list[Any]:
    return [
        pytest.param(qualname, name, value, id=f"{qualname}-{name}-{value_id(value)}")
        for qualname, function in public_functions().items()
        for name, constraint in param_constraints(function).items()
        for value in constraint.invalid_values()
    ]


@pytest.mark.parametrize(("qualname", "name", "value"), cases())
def test_every_invalid_value_is_refused_naming_its_parameter(qualname, name, value, folder):
    function = public_functions()[qualname]
    with pytest.raises(InvalidInputError, match=rf"^{re.escape(name)} must be .*; got "):
        call_with(qualname, function, name, value, folder)
    assert not any(folder.iterdir()), "the function ran before refusing the value"


def keyword_only(function: Callable[..., Any]) -> list[str]:
    return [
        p.name for p in inspect.signature(function).parameters.values()
        if p.kind == p.KEYWORD_ONLY
    ]


def test_every_option_of_a_public_function_is_declared():
    missing = [
        f"{qualname}({name})"
        for qualname, function in public_functions().items()
        for name in options(function)
        if name not in param_constraints(function) and f"{qualname}({name})" not in UNDECLARED
    ]
    assert not missing, f"declare with validate_params or justify in UNDECLARED: {missing}"
    undeclared = [
        qualname
        for qualname, function in public_functions().items()
        if keyword_only(function) and not param_constraints(function)
        and qualname not in UNDECLARED
    ]
    assert not undeclared, f"declare their options or justify in UNDECLARED: {undeclared}"
    stale = [
        key for key in UNDECLARED
        if key.partition("(")[0] not in public_functions()
        or (key in public_functions() and param_constraints(public_functions()[key]))
    ]
    assert not stale, f"UNDECLARED lists what is not public or is declared now: {stale}"


def test_the_walk_finds_the_public_functions():
    found = public_functions()
    assert {"metricalc.tpr", "metricalc.stats.compare", "metricalc.decompose.what_if"} <= set(found)
    assert sum(bool(param_constraints(f)) for f in found.values()) >= 40


# -- the declarative layer itself ------------------------------------------------------------

CONSTRAINTS: list[tuple[Constraint, list[object]]] = [
    (Choice(("a", "b")), ["a", "b"]),
    (Choice(("nan", 0, 1)), ["nan", 0, 1, np.int64(1), 1.0]),
    (Integer(1, 3), [1, 3, np.int32(2)]),
    (Real(0, 1, closed="left"), [0, 0.5, np.float32(0.99)]),
    (Fraction(), [0.05, 0.5]),
    (Boolean(), [True, False, np.bool_(True)]),
    (Text(), ["a"]),
    (Text(empty=True), ["", "a"]),
    (Function(), [len, np.nanmean]),
    (Nullable(Integer(0)), [None, 0, 7]),
    (OneOf(Integer(1), ListOf(Integer(1))), [1, [1, 5], np.array([2, 3])]),
]


@pytest.mark.parametrize(("constraint", "valid"), CONSTRAINTS, ids=value_id)
def test_a_constraint_accepts_its_values_and_refuses_its_invalid_values(constraint, valid):
    assert all(constraint.accepts(v) for v in valid)
    invalid = constraint.invalid_values()
    assert invalid and not any(constraint.accepts(v) for v in invalid)


def test_the_invalid_values_are_worked_out_from_the_bounds():
    assert Integer(1, 3).invalid_values() == (0, 4, 1.5, True, "1")
    assert Real(0, 1, closed="right").invalid_values()[:3] == (0, -1, 2)
    assert Fraction().accepts(0.5) and not any(Fraction().accepts(v) for v in (0, 1, np.nan))
    assert Nullable(Integer(0)).invalid_values() == (-1, 1.5, True, "1")


def hits(ranks: list[int], k: int = 1, *, policy: str = "expected") -> int:
    """The number of ``ranks`` below ``k``."""
    return sum(r < k for r in ranks)


def test_the_decorator_checks_given_arguments_and_keeps_the_function():
    checked = validate_params(k=Integer(1), policy=Choice(("expected", "optimistic")))(hits)
    assert checked([0, 3], 2) == 1 and checked([0, 3], k=4, policy="optimistic") == 2
    with pytest.raises(InvalidInputError, match=r"^k must be an integer >= 1; got 0$"):
        checked([0], 0)
    with pytest.raises(InvalidInputError, match=r"^policy must be one of 'expected', "):
        checked([0], policy="mean")
    with pytest.raises(InvalidInputError, match=r"^k must be .*; got array\(\[\[ *0, +1\], ") as e:
        checked([0], np.arange(200).reshape(-1, 2))
    assert "\n" not in str(e.value) and str(e.value).endswith(" ...")  # one line, shortened
    assert inspect.signature(checked) == inspect.signature(hits)
    assert checked.__doc__ == hits.__doc__ and checked.__name__ == "hits"
    assert set(param_constraints(checked)) == {"k", "policy"} and not param_constraints(hits)


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"top_k": Integer(1)}, "top_k is not a parameter of hits"),
        ({"k": Integer(2)}, r"the default k=1 is not an integer >= 2"),
    ],
)
def test_a_wrong_declaration_fails_when_the_function_is_defined(declared, message):
    with pytest.raises(TypeError, match=message):
        validate_params(**declared)(hits)
