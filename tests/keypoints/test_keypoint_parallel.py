"""The keypoint pipeline on every core gives the serial pipeline's results bit for bit.

Images are extracted and (descriptor, scene) evaluations run in threads
(:mod:`metricalc.keypoints.parallel`); DSP-SIFT shares SIFT's ``compute`` call; the Bojanic
tasks keep their first pass's distances; ``metricalc demo`` evaluates the native cube in the
background when its distances are exact in float32. Each is checked against the slow, obvious
way here.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import replace

import cv2
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from metricalc.errors import InvalidInputError
from metricalc.keypoints import bojanic, matching, parallel
from metricalc.keypoints.describers import ImageDescriber
from metricalc.keypoints.detectors import Toolkit, select
from metricalc.keypoints.extraction import extract, extract_both
from metricalc.keypoints.matching import (
    exact_products,
    prepare_candidates,
    prepare_queries,
    squared_distances,
)
from metricalc.keypoints.pipeline import (
    EvaluationSettings,
    cached_evaluation,
    evaluate_sequences,
    extract_features,
    holds_key,
)

METHODS = ("sift", "rootsift", "dspsift", "orb", "brief", "raw_patch")
LIMIT = 300  # keypoints per image: seconds per test


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    from metricalc.datasets.sequences import make_synthetic_dataset

    root = tmp_path_factory.mktemp("parallel")
    return make_synthetic_dataset(root, scenes=["camera", "astronaut"], seed=0, size=256)


def _cores(monkeypatch, n):
    monkeypatch.setattr(parallel, "available_cores", lambda: n)


def _same(a, b):
    a, b = a.drop_vars("processing_time_ms"), b.drop_vars("processing_time_ms")
    a.attrs.pop("cache_key", None)
    assert a.identical(b)


# ---------------------------------------------------------------------------------------------
# run_parallel / run_staged
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_run_staged_keeps_the_order_of_tasks_and_groups(workers):
    seen = []
    groups = [[3, 1, 2], [], [5], [4, 4]]
    out = parallel.run_staged(
        lambda x: (x, threading.current_thread().name),
        groups,
        lambda i, results: (i, [x for x, _ in results]),
        workers=workers,
        done=lambda: seen.append(1),
    )
    assert out == [(0, [3, 1, 2]), (1, []), (2, [5]), (3, [4, 4])]
    assert len(seen) == 6
    assert parallel.run_parallel(lambda x: -x, [1, 2, 3], workers=workers) == [-1, -2, -3]


@pytest.mark.parametrize("workers", [1, 2])
def test_run_staged_raises_the_error_of_a_task_or_of_a_finish(workers):
    def work(x):
        if x == 2:
            raise ValueError("task 2 failed")
        return x

    with pytest.raises(ValueError, match="task 2 failed"):
        parallel.run_staged(work, [[1], [2, 3]], lambda i, r: r, workers=workers)
    with pytest.raises(KeyError, match="finish"):
        parallel.run_staged(
            lambda x: x, [[1], [3]], lambda i, r: {}["finish"], workers=workers
        )


def test_run_staged_finishes_a_group_while_later_tasks_run():
    """The finish of group 0 starts before the task of group 1 ends (it waits for it)."""
    finished = threading.Event()

    def work(x):
        if x == 1:
            assert finished.wait(timeout=30), "group 0 was not finished while this task ran"
        return x

    def finish(i, results):
        if i == 0:
            finished.set()
        return results

    assert parallel.run_staged(work, [[0], [1]], finish, workers=2) == [[0], [1]]


# ---------------------------------------------------------------------------------------------
# threads give the serial results
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keypoints", ["locked:sift", "native"])
def test_threaded_extraction_and_evaluation_equal_the_serial_ones(
    sequences, keypoints, monkeypatch
):
    methods = METHODS if keypoints != "native" else ("sift", "orb", "brief")
    settings = EvaluationSettings(methods, keypoints, max_keypoints=LIMIT)
    _cores(monkeypatch, 1)
    serial_features = extract_features(sequences, settings)
    serial = evaluate_sequences(sequences, settings, features=serial_features)
    _cores(monkeypatch, 2)
    features = extract_features(sequences, settings)
    for name in methods:
        for scene in serial_features[name]:
            for k, image in serial_features[name][scene].items():
                threaded = features[name][scene][k]
                assert np.array_equal(image.keypoints, threaded.keypoints)
                assert np.array_equal(image.descriptors, threaded.descriptors)
    _same(evaluate_sequences(sequences, settings), serial)


def test_a_failing_scene_makes_an_error_record_of_its_descriptor_only(sequences, monkeypatch):
    settings = EvaluationSettings(("sift", "orb"), "locked:sift", LIMIT, bojanic=False)
    features = extract_features(sequences, settings)
    del features["orb"][sequences[1].name]
    _cores(monkeypatch, 2)
    cube = evaluate_sequences(sequences, settings, features=features)
    assert cube["status"].values.tolist() == ["ok", "error"]
    assert f"no features for scene {sequences[1].name!r}" in str(cube["error"].values[1])


def test_evaluate_sequences_takes_features_extracted_before(sequences, tmp_path):
    settings = EvaluationSettings(("sift", "brief"), "locked:sift", LIMIT)
    features = extract_features(sequences, settings)
    cube, reused = cached_evaluation(
        sequences, settings, tmp_path, name="cube.nc", features=lambda: features
    )
    assert not reused
    _same(cube, evaluate_sequences(sequences, settings))
    key = cube.attrs["cache_key"]
    assert holds_key(tmp_path / "cube.nc", key)
    assert not holds_key(tmp_path / "cube.nc", "0" * 24)
    assert not holds_key(tmp_path / "missing.nc", key)
    (tmp_path / "broken.nc").write_text("not a cube")
    assert not holds_key(tmp_path / "broken.nc", key)


# ---------------------------------------------------------------------------------------------
# work done once instead of twice
# ---------------------------------------------------------------------------------------------


def test_dspsift_in_one_compute_call_gives_the_rows_of_separate_calls(sequences):
    tools = Toolkit(None)
    for sequence in sequences:
        gray = sequence.gray(3)
        kept = select(tools.detect("sift", gray), gray.shape, 20.0, 500)
        fast = select(tools.detect("fast", gray), gray.shape, 20.0, 300)
        for keypoints, detector in ((kept, "sift"), (fast, "fast")):
            alone = ImageDescriber(tools.get, gray)  # DSP-SIFT's scales in a call of their own
            shared = ImageDescriber(tools.get, gray, ("sift", "dspsift"))
            for method in ("sift", "dspsift"):
                index, rows = alone.describe(method, keypoints, detector)
                index_shared, rows_shared = shared.describe(method, keypoints, detector)
                assert index.tolist() == index_shared.tolist()
                assert np.array_equal(rows, rows_shared), (method, detector)
            assert shared._larger and not alone._larger  # the shared call was taken


def test_scene_tasks_with_kept_distances_equal_the_recomputed_ones(sequences, monkeypatch):
    """The scene lists rank the pair evaluations' products (kept), or their own: identical for
    exact products (SIFT's whole numbers, bits); within float32 rounding for real values."""
    exact = EvaluationSettings(("sift", "orb"), "locked:sift", LIMIT, y0="ignore")
    real = EvaluationSettings(("rootsift", "raw_patch"), "locked:sift", LIMIT)
    features = {s: extract_features(sequences, s) for s in (exact, real)}
    kept = {s: evaluate_sequences(sequences, s, features=features[s]) for s in (exact, real)}
    monkeypatch.setattr(bojanic, "KEPT_DISTANCE_ELEMENTS", 0)  # every pass computes its GEMM
    _same(evaluate_sequences(sequences, exact, features=features[exact]), kept[exact])
    again = evaluate_sequences(sequences, real, features=features[real])
    for name in bojanic.SCENE_RESULTS:
        np.testing.assert_allclose(again[name], kept[real][name], rtol=0, atol=1e-4)
    _same(again.drop_vars(bojanic.SCENE_RESULTS), kept[real].drop_vars(bojanic.SCENE_RESULTS))


def test_match_pair_keeps_the_products_it_ranked(monkeypatch):
    rng = np.random.default_rng(3)
    queries, candidates = rng.normal(size=(700, 20)), rng.normal(size=(900, 20))
    queries, candidates = queries.astype(np.float32), candidates.astype(np.float32)
    relevant = rng.integers(-1, 900, size=700)
    monkeypatch.setattr(matching, "GEMM_CHUNK_ELEMENTS", 900 * 256)  # chunks of 256 queries
    kept = matching.match_pair(queries, candidates, relevant, keep_squared=True)
    plain = matching.match_pair(queries, candidates, relevant)
    assert plain.squared is None and kept.squared.shape == (700, 900)
    rows = [
        squared_distances(prepare_queries(queries[i : i + 256]), prepare_candidates(candidates))
        for i in range(0, 700, 256)
    ]
    assert np.array_equal(kept.squared, np.concatenate(rows))  # the nearest ones put back
    for field in ("better", "ties", "nn_index", "nn_distance", "nn2_distance", "nn_mutual"):
        assert np.array_equal(getattr(kept, field), getattr(plain, field), equal_nan=True)


def test_extract_both_gives_the_two_extractions(sequences):
    """One pass for the demo's two extractions: the locked one, and SIFT on its own keypoints,
    which the locked one may thin out (border 0: BRIEF and ORB cannot describe keypoints whose
    patch leaves the image, so the locked run drops them for every method)."""
    locked, native = extract_both(
        sequences, METHODS, ("sift", "rootsift"), locked="sift", max_keypoints=LIMIT, border=0
    )
    alone_locked = extract(sequences, METHODS, locked="sift", max_keypoints=LIMIT, border=0)
    alone_native = extract(sequences, ("sift", "rootsift"), max_keypoints=LIMIT, border=0)
    thinned = 0
    for result, alone in ((locked, alone_locked), (native, alone_native)):
        assert list(result) == list(alone)
        for name, scenes in alone.items():
            for scene, images in scenes.items():
                for k, features in images.items():
                    mine = result[name][scene][k]
                    assert np.array_equal(mine.keypoints, features.keypoints)
                    assert np.array_equal(mine.descriptors, features.descriptors)
                    if result is native:
                        thinned += len(features.keypoints) > len(locked[name][scene][k].keypoints)
    assert thinned > 0


@pytest.mark.parametrize(
    ("locked_retrieval", "native_bojanic"), [(True, True), (False, True), (False, False)]
)
def test_results_of_a_locked_run_stand_for_native_sift(
    sequences, monkeypatch, locked_retrieval, native_bojanic
):
    """Native SIFT's part of a native cube taken from a cube locked on SIFT (the same features)
    is the part a second evaluation gives: whether the locked run had image retrieval (its
    variables at their sentinels here) or the native run has no per-scene tasks at all."""
    evaluation = importlib.import_module("metricalc.keypoints.evaluate")  # not kp.evaluate()
    locked_settings = EvaluationSettings(
        ("sift", "brief"), "locked:sift", LIMIT, image_retrieval=locked_retrieval
    )
    native = EvaluationSettings(("sift", "orb"), "native", LIMIT, bojanic=native_bojanic)
    locked_features, native_features = extract_both(
        sequences, ("sift", "brief"), ("sift",), locked="sift", max_keypoints=LIMIT
    )
    native_features |= extract_features(sequences, replace(native, descriptors=("orb",)))
    locked = evaluate_sequences(sequences, locked_settings, features=locked_features)
    alone = evaluate_sequences(sequences, native, features=native_features)
    ran = []
    run_task = evaluation._run_task
    monkeypatch.setattr(evaluation, "_run_task", lambda task, *a, **k: ran.append(task.name)
                        or run_task(task, *a, **k))  # fmt: skip
    taken = evaluate_sequences(
        sequences, native, features=native_features, results_of={"sift": locked}
    )
    assert set(ran) == {"orb"}
    _same(taken, alone)


def test_results_of_refuses_another_protocol_or_descriptor(sequences):
    settings = EvaluationSettings(("sift",), "locked:sift", LIMIT)
    features = extract_features(sequences, settings)
    locked = evaluate_sequences(sequences, settings, features=features)
    other = replace(settings, keypoints="native", tau=5.0)
    with pytest.raises(InvalidInputError, match=r"another protocol \(tau_px=3.0, not 5.0\)"):
        evaluate_sequences(sequences, other, features=features, results_of={"sift": locked})
    with pytest.raises(InvalidInputError, match=r"results_of names \['orb'\], which are not"):
        evaluate_sequences(sequences, settings, features=features, results_of={"orb": locked})


def test_extract_both_takes_only_methods_of_the_locked_detector(sequences):
    with pytest.raises(InvalidInputError, match=r"native methods \['orb'\] do not use"):
        extract_both(sequences, ("sift",), ("sift", "orb"), locked="sift")


# ---------------------------------------------------------------------------------------------
# exact products: the same distances with any number of BLAS threads
# ---------------------------------------------------------------------------------------------


def _products(descriptors, threads):
    with threadpool_limits(limits=threads, user_api="blas"):
        half = len(descriptors) // 2
        return squared_distances(
            prepare_queries(descriptors[:half]), prepare_candidates(descriptors[half:])
        )


def test_exact_products_are_the_same_with_one_or_two_blas_threads(sequences):
    gray = sequences[0].gray(2)
    sift = cv2.SIFT.create()
    _, rows = sift.detectAndCompute(gray, None)
    rows = rows[:600]
    assert exact_products(rows)  # OpenCV's SIFT rows are whole numbers of norm about 512
    assert np.array_equal(_products(rows, 1), _products(rows, 2))
    bits = np.random.default_rng(0).integers(0, 256, size=(600, 32), dtype=np.uint8)
    assert exact_products(bits)
    assert np.array_equal(_products(bits, 1), _products(bits, 2))


@pytest.mark.parametrize(
    ("rows", "exact"),
    [
        (np.array([[3.0, 4.0], [0.0, 1.0]], np.float32), True),
        (np.array([[3.0, 4.5]], np.float32), False),  # not whole numbers
        (np.array([[np.nan, 1.0]]), False),
        (np.full((1, 128), 255.0, np.float32), False),  # 4 |a|^2 = 33.3 M > 2**24
        (np.full((1, 128), 180.0, np.float32), True),  # 4 |a|^2 = 16.6 M < 2**24
        (np.zeros((0, 128), np.float32), True),
    ],
)
def test_exact_products_bound(rows, exact):
    assert exact_products(rows) is exact


def test_real_valued_products_depend_on_the_blas_threads():
    """Why the bound matters: rows that are not whole numbers (RootSIFT) round differently
    with one and two BLAS threads on this machine's OpenBLAS, so threads must not change
    BLAS's own thread count. Skipped where BLAS happens to agree (another BLAS, one core)."""
    rows = np.random.default_rng(1).random((800, 128), dtype=np.float32)
    assert not exact_products(rows)
    if np.array_equal(_products(rows, 1), _products(rows, 2)):
        pytest.skip("this BLAS gives the same rounding with one and two threads")
