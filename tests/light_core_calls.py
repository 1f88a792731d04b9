"""Every public metric of metricalc computed on small inputs, printed as JSON on one line.

Run as a script by tests/test_light_core.py, once as installed (``--calls-only``: the results
only) and once with ``--without-extras``: then the modules of every optional dependency
(:data:`metricalc.lazy.EXTRAS`, and scikit-learn, a test dependency) are marked absent before
metricalc is imported, as on a machine with ``pip install metricalc`` and no extra. A module set
to None in ``sys.modules`` is what Python's import system treats as "not importable": ``import
cv2`` raises ModuleNotFoundError and ``importlib.util.find_spec("cv2")`` returns None, as for a
package that is not installed (a ``sys.meta_path`` finder that raised would break the
``find_spec`` probes xarray and pandas make for optional libraries, which an absent library
answers with None).

The output: ``results`` (name -> the result as JSON values, NaN as None), ``names`` (each
public subpackage of ``metricalc.__all__`` -> each name of its ``__all__`` -> ``"ok"`` or the
error it raised) and ``loaded`` (the blocked modules imported after all: none may be).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from importlib.util import find_spec
from typing import Any

from metricalc.lazy import EXTRAS  # the standard library only: nothing is imported yet

BLOCKED = (*EXTRAS, "sklearn")
"""The top-level modules of the optional dependencies, and scikit-learn (tests only)."""

if "--without-extras" in sys.argv:
    for _name in BLOCKED:
        sys.modules[_name] = None  # type: ignore[assignment]  # "not importable"

import numpy as np  # noqa: E402  (after the modules are marked absent)

import metricalc as mc  # noqa: E402
from metricalc import cube as qc  # noqa: E402

Y_TRUE = [1, 0, 1, 1, 0]
Y_SCORE = [0.9, 0.8, 0.7, 0.7, 0.2]
COUNTS = {"tp": 3, "fp": 1, "fn": 1, "tn": 5}
BETTER = np.array([0, 1, 2, 4])
TIES = np.array([0, 1, 0, 2])


def small_cube() -> Any:
    """Two descriptors, an illumination and a viewpoint scene, two queries each; no ties, so a
    query's AP is 1 / (better + 1) (descriptor ``a``'s last query has no relevant keypoint)."""
    return qc.new_cube(
        ["a", "b"],
        {"scene": ["i_a", "i_a", "v_b", "v_b"], "pair": ["1-2"] * 4, "keypoint_set": ["a"] * 4,
         "query_keypoint": [0, 1, 2, 3]},
        {"better": [[0, 1, 2, -1], [1, 0, 0, 3]], "ties": [[0, 0, 0, -1], [0, 0, 0, 0]],
         "nn_correct": [[1, 0, 0, 0], [0, 1, 1, 0]],
         "nn_distance": [[1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 1.0, 3.0]],
         "nn2_distance": [[2.0, 2.5, 3.5, 5.0], [3.0, 2.0, 4.0, 3.5]],
         "nn_error": [[0.5, 4.0, 6.0, 9.0], [5.0, 1.0, 2.0, 8.0]],
         "nn_mutual": [[1, 0, 1, 0], [1, 1, 0, 1]], "n_candidates": [[5] * 4, [5] * 4]},
        attrs=qc.DEFAULT_ATTRS,
    )


def trec_map() -> Any:
    """trec_eval's ``map`` and ``P.2`` of a two-query run (pyarrow, no extra)."""
    from metricalc.retrieval import Qrels, Run, evaluate

    qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 1, "d3": 0}, "q2": {"d9": 1}})
    run = Run.from_dict({"q1": {"d1": 3.0, "d3": 2.0, "d2": 1.0}, "q2": {"d9": 1.0}})
    return evaluate(qrels, run, ["map", "P.2"]).summary


def cube_file_round_trip() -> Any:
    """The small cube written to a netCDF-4 file and read back (h5netcdf, no extra)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        qc.save(small_cube(), Path(folder) / "cube.nc")
        with qc.open_cube(Path(folder) / "cube.nc") as cube:
            return cube.ap.load()


def paired_comparison() -> Any:
    """The two descriptors of a cube with 8 scenes compared by a paired test over scenes."""
    from metricalc.stats import compare

    better = np.array([[0, 1, 0, 2, 0, 0, 1, 0], [1, 3, 2, 2, 4, 1, 3, 2]])
    cube = qc.new_cube(
        ["a", "b"],
        {"scene": [f"i_{s}" for s in "abcdefgh"], "pair": ["1-2"] * 8,
         "keypoint_set": ["a"] * 8, "query_keypoint": list(range(8))},
        {"better": better, "ties": np.zeros_like(better)},
        attrs=qc.DEFAULT_ATTRS,
    )
    return compare(cube, n_resamples=999)[["mean_diff", "pvalue"]]


CALLS: dict[str, Callable[[], Any]] = {
    "counts_at_thresholds": lambda: mc.counts_at_thresholds(Y_TRUE, Y_SCORE),
    **{rate: (lambda rate=rate: getattr(mc, rate)(COUNTS))
       for rate in ("tpr", "fpr", "tnr", "precision", "recall", "accuracy", "f1", "youden_j")},
    "rate_confint": lambda: mc.rate_confint(COUNTS, "tpr"),
    "auc": lambda: mc.auc([0.0, 0.5, 1.0], [0.0, 1.0, 1.0], dim="x"),
    "pr_curve": lambda: mc.pr_curve(Y_TRUE, Y_SCORE),
    "roc_curve": lambda: mc.roc_curve(Y_TRUE, Y_SCORE),
    "roc_auc": lambda: mc.roc_auc(Y_TRUE, Y_SCORE),
    "average_precision": lambda: [
        mc.average_precision([1, 0, 1], [0.9, 0.8, 0.7]),
        *(mc.average_precision(Y_TRUE, Y_SCORE, method=m) for m in mc.AP_METHODS),
    ],
    "rank_stats": lambda: mc.rank_stats(np.array([[0.1, 0.5, 0.3, 0.3]]), np.array([2])),
    "ap_from_rank_stats": lambda: mc.ap_from_rank_stats(BETTER, TIES),
    "rank_from_rank_stats": lambda: mc.rank_from_rank_stats(BETTER, TIES),
    "hit_rate_at_k": lambda: mc.hit_rate_at_k(BETTER, TIES, [1, 2]),
    "precision_at_k": lambda: mc.precision_at_k(BETTER, TIES, [1, 2]),
    "metric_set": lambda: mc.metric_set(small_cube())[["true_map_micro", "illumination_map"]],
    "scene_metrics": lambda: mc.scene_metrics(small_cube()),
    "matching_accuracy": lambda: mc.matching_accuracy(small_cube()),
    "matching_counts": lambda: mc.matching_counts(small_cube()),
    "matching_pr_curve": lambda: mc.matching_pr_curve(small_cube()),
    "matching_roc_curve": lambda: mc.matching_roc_curve(small_cube()),
    "format_metadata": lambda: mc.format_metadata({"tau_px": 3.0, "dataset": "hpatches"}),
    "parse_metadata": lambda: mc.parse_metadata("dataset=hpatches;tau_px=3.0"),
    # beyond the top level: the other core tasks
    "retrieval.evaluate": trec_map,
    "cube.save+open_cube": cube_file_round_trip,
    "stats.compare": paired_comparison,
    "pose.pose_auc": lambda: mc.pose.pose_auc([0.0, 2.0, np.inf, 30.0], [5, 10]),
    "pose.imc_maa": lambda: mc.pose.imc_maa([0.0, 2.0, np.inf, 30.0]),
}
"""Each public function of ``metricalc`` (the test checks that none is missing), and a few of
the subpackages', called on small inputs."""


def plain(value: Any) -> Any:
    """``value`` as JSON values: a Dataset as {variable: values}, arrays as lists, NaN as None."""
    if hasattr(value, "data_vars"):
        return {str(name): plain(variable) for name, variable in value.data_vars.items()}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return value
    item = np.asarray(getattr(value, "values", value)).tolist()
    if isinstance(item, list):
        return plain(item)
    return None if isinstance(item, float) and math.isnan(item) else item


def public_names() -> dict[str, dict[str, str]]:
    """Each subpackage of ``metricalc.__all__`` -> each name of its ``__all__`` -> ``"ok"`` or
    ``"<error class>: <message>"`` (the subpackage itself under the name ``""``)."""
    out: dict[str, dict[str, str]] = {}
    for package in mc.__all__:
        spec = find_spec(f"metricalc.{package}") if not package.startswith("_") else None
        if spec is None or spec.submodule_search_locations is None:
            continue  # a function, class or constant
        try:
            module = getattr(mc, package)
        except Exception as error:
            out[package] = {"": f"{type(error).__name__}: {error}"}
            continue
        out[package] = {"": "ok"}
        for name in module.__all__:
            try:
                getattr(module, name)
            except Exception as error:
                out[package][name] = f"{type(error).__name__}: {error}"
            else:
                out[package][name] = "ok"
    return out


def main() -> None:
    results = {name: plain(call()) for name, call in CALLS.items()}
    names = {} if "--calls-only" in sys.argv else public_names()
    loaded = sorted(
        m for m in sys.modules
        if m.partition(".")[0] in BLOCKED and sys.modules[m] is not None
    )
    print(json.dumps({"results": results, "names": names, "loaded": loaded}))


if __name__ == "__main__":
    main()
