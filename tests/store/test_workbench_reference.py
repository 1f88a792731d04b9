"""metric_set against DescriptorWorkbench itself (F-Sossi/DescriptorWorkbench).

Three references, none of them metricalc code:

1. DescriptorWorkbench's own gtest cases (``tests/unit/metrics/test_experiment_metrics_gtest.cpp``
   and ``test_image_retrieval_map_gtest.cpp``), ported number for number: each case's
   ``addQueryAP`` / ``addImageResult`` / ``addImageRetrievalAP`` calls become the queries and
   image pairs of a QueryCube, and its expected numbers are asserted on :func:`metric_set`.
2. :class:`WorkbenchMetrics`, a line-by-line Python port (written here) of
   ``ExperimentMetrics`` (``src/core/metrics/ExperimentMetrics.hpp``: ``addQueryAP``,
   ``addImageResult``, ``addImageRetrievalAP``, ``merge``, ``calculateMeanPrecision``), fed the
   way ``processSingleScene`` / ``processDirectoryNew`` feed it (one object per scene, merged),
   compared with ``metric_set(cube, zero_division=0)`` on many random cubes.
3. The real DescriptorWorkbench export (``tests/data/descriptorworkbench-export``): the scene
   means recomputed from each row's per-scene metadata, and metric_set on a cube that holds
   the same per-scene sums, against the exported columns.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from metricalc.metrics import metric_set
from metricalc.store.metadata import parse_metadata
from metricalc.store.workbench import MAP_TOLERANCE, read_workbench

EXPORT = Path(__file__).parents[1] / "data" / "descriptorworkbench-export"
PERFORMANCE = EXPORT / "descriptor_performance_analysis.csv"


# --------------------------------------------------------------------------------------------
# Building QueryCubes from DescriptorWorkbench-style calls
# --------------------------------------------------------------------------------------------


@dataclass
class Query:
    """One ``addQueryAP`` call: ``ap`` None is a query without potential match (R = 0)."""

    scene: str
    ap: float | None
    rank: int = 1
    pair: str = "1-2"
    nn_correct: int = 0
    nn_mutual: int = 0
    n_candidates: int = 0


@dataclass
class Descriptor:
    queries: list[Query] = field(default_factory=list)
    image_retrieval_ap: list[float] = field(default_factory=list)


def build_cube(descriptors: dict[str, Descriptor]) -> xr.Dataset:
    """A QueryCube over the union of the descriptors' queries (R = -1 where one lacks a query).

    A query is identified by its position in its descriptor's list and its scene; ``better`` is
    rank - 1 without ties (tie policy ``workbench``), ``ap`` the given value (the gtest cases
    give APs independent of the rank, as DescriptorWorkbench's QueryAPResult does)."""
    names = list(descriptors)
    width = max((len(d.queries) for d in descriptors.values()), default=0)
    images = max((len(d.image_retrieval_ap) for d in descriptors.values()), default=0)
    shape = (len(names), width)
    n_relevant = np.full(shape, -1, np.int8)
    better = np.full(shape, -1, np.int64)
    ap = np.full(shape, np.nan)
    nn_correct = np.full(shape, -1, np.int8)
    nn_mutual = np.full(shape, -1, np.int8)
    n_candidates = np.full(shape, -1, np.int64)
    retrieval = np.full((len(names), images), np.nan)
    scene = np.full(width, "", dtype=object)
    pair = np.full(width, "1-2", dtype=object)
    for i, d in enumerate(descriptors.values()):
        retrieval[i, : len(d.image_retrieval_ap)] = d.image_retrieval_ap
        for j, q in enumerate(d.queries):
            if scene[j] not in ("", q.scene) or (scene[j] and pair[j] != q.pair):
                raise AssertionError("descriptors must share the scene and pair of a position")
            scene[j], pair[j] = q.scene, q.pair
            n_relevant[i, j] = 0 if q.ap is None else 1
            if q.ap is not None:
                better[i, j], ap[i, j] = q.rank - 1, q.ap
            nn_correct[i, j], nn_mutual[i, j] = q.nn_correct, q.nn_mutual
            n_candidates[i, j] = q.n_candidates
    two = ("descriptor", "query")
    data = {
        "n_relevant": (two, n_relevant),
        "better": (two, better),
        "ties": (two, np.where(better >= 0, 0, -1)),
        "ap": (two, ap),
        "nn_correct": (two, nn_correct),
        "nn_mutual": (two, nn_mutual),
        "n_candidates": (two, n_candidates),
    }
    if images:  # one image-retrieval query per scene: any scene names do
        data["image_retrieval_ap"] = (("descriptor", "sequence"), retrieval)
    split = ["viewpoint" if s[:1] == "v" else "illumination" if s[:1] == "i" else "other"
             for s in scene]  # fmt: skip
    coords = {
        "descriptor": names,
        "scene": ("query", scene.astype(str)),
        "split": ("query", np.array(split, dtype=str)),
        "pair": ("query", pair.astype(str)),
    }
    return xr.Dataset(data, coords=coords, attrs={"tie_policy": "workbench", "ap_method": "ir"})


def one(metrics: xr.Dataset, name: str, descriptor: str = "d") -> float:
    return float(metrics[name].sel(descriptor=descriptor))


def image_result(scene: str, pair: str, matches: int, keypoints: int) -> list[Query]:
    """``addImageResult(scene, precision, matches, keypoints)`` as one image pair: ``matches``
    queries with a mutual nearest neighbour, all with ``n_candidates = keypoints`` (R = 0, so
    they touch no mAP)."""
    return [
        Query(scene, None, pair=pair, nn_mutual=1, n_candidates=keypoints) for _ in range(matches)
    ]


def precision_pair(scene: str, pair: str, correct: int, total: int) -> list[Query]:
    """An image pair whose legacy precision is correct / total (R = 1 queries, AP 1)."""
    return [
        Query(scene, 1.0, pair=pair, nn_correct=int(k < correct), nn_mutual=1, n_candidates=1)
        for k in range(total)
    ]


# --------------------------------------------------------------------------------------------
# 1. DescriptorWorkbench's gtest cases, number for number
# --------------------------------------------------------------------------------------------


def test_gtest_default_construction_and_empty_calculation() -> None:
    """DefaultConstruction / CalculateMeanPrecisionEmpty: every metric 0 (zero_division=0;
    metricalc's default is NaN), the counts 0; image_retrieval_map NaN (DW: -1 sentinel)."""
    cube = build_cube({"d": Descriptor()})
    zero = metric_set(cube, zero_division=0)
    for name in (
        "mean_precision",
        "legacy_macro_precision_by_scene",
        "true_map_micro",
        "true_map_macro_by_scene",
        "hit_rate_at_1",
        "hit_rate_at_5",
        "hit_rate_at_10",
        "viewpoint_map",
        "illumination_map",
        "viewpoint_map_including_zeros",
        "illumination_map_including_zeros",
    ):
        assert one(zero, name) == 0.0, name
    assert int(zero.total_matches.sel(descriptor="d")) == 0
    assert int(zero.total_keypoints.sel(descriptor="d")) == 0
    assert math.isnan(one(zero, "image_retrieval_map"))
    default = metric_set(cube)
    assert math.isnan(one(default, "true_map_micro")) and math.isnan(one(default, "viewpoint_map"))


def test_gtest_add_image_result_basic() -> None:
    """AddImageResultBasic: addImageResult("test_scene", 0.75, 30, 40)."""
    metrics = metric_set(build_cube({"d": Descriptor(image_result("test_scene", "1-2", 30, 40))}))
    assert int(metrics.total_matches.sel(descriptor="d")) == 30
    assert int(metrics.total_keypoints.sel(descriptor="d")) == 40


def test_gtest_add_image_result_multiple_images() -> None:
    """AddImageResultMultipleImages: (scene1, 25, 50), (scene1, 15, 30), (scene2, 35, 70)."""
    queries = [
        *image_result("scene1", "1-2", 25, 50),
        *image_result("scene1", "1-3", 15, 30),
        *image_result("scene2", "1-2", 35, 70),
    ]
    metrics = metric_set(build_cube({"d": Descriptor(queries)}))
    assert int(metrics.total_matches.sel(descriptor="d")) == 75  # 25 + 15 + 35
    assert int(metrics.total_keypoints.sel(descriptor="d")) == 150  # 50 + 30 + 70


@pytest.mark.parametrize(
    "first, second, matches, keypoints",
    [
        (("scene1", 20, 40), ("scene2", 30, 60), 50, 100),  # MergeBasic
        (("shared_scene", 10, 20), ("shared_scene", 15, 30), 25, 50),  # MergeSameScene
    ],
)
def test_gtest_merge_counts(first, second, matches, keypoints) -> None:
    """MergeBasic / MergeSameScene: two ExperimentMetrics merged; metricalc holds both image
    pairs in one cube."""
    queries = [
        *image_result(first[0], "1-2", *first[1:]),
        *image_result(second[0], "1-3", *second[1:]),
    ]
    metrics = metric_set(build_cube({"d": Descriptor(queries)}))
    assert int(metrics.total_matches.sel(descriptor="d")) == matches
    assert int(metrics.total_keypoints.sel(descriptor="d")) == keypoints


def test_gtest_calculate_mean_precision_basic() -> None:
    """CalculateMeanPrecisionBasic: image precisions 0.8, 0.6 (scene1) and 0.9 (scene2)."""
    queries = [
        *precision_pair("scene1", "1-2", 4, 5),
        *precision_pair("scene1", "1-3", 3, 5),
        *precision_pair("scene2", "1-2", 9, 10),
    ]
    metrics = metric_set(build_cube({"d": Descriptor(queries)}))
    assert one(metrics, "mean_precision") == pytest.approx(0.7667, abs=1e-4)
    assert one(metrics, "legacy_macro_precision_by_scene") == pytest.approx(0.8, abs=1e-6)


def test_gtest_add_query_ap_with_and_without_match() -> None:
    """AddQueryAPWithMatch (ap 0.8, rank 2) / AddQueryAPWithoutMatch (R = 0)."""
    matched = metric_set(build_cube({"d": Descriptor([Query("test_scene", 0.8, rank=2)])}))
    assert int(matched.total_queries_processed.sel(descriptor="d")) == 1
    assert int(matched.total_queries_excluded.sel(descriptor="d")) == 0
    assert one(matched, "true_map_micro") == pytest.approx(0.8)
    unmatched = metric_set(build_cube({"d": Descriptor([Query("test_scene", None)])}))
    assert int(unmatched.total_queries_processed.sel(descriptor="d")) == 0
    assert int(unmatched.total_queries_excluded.sel(descriptor="d")) == 1


def test_gtest_calculate_mean_precision_with_true_map_data() -> None:
    """CalculateMeanPrecisionWithTrueMAPData: scene1 APs 1.0, 0.5; scene2 0.8."""
    queries = [Query("scene1", 1.0), Query("scene1", 0.5, rank=2), Query("scene2", 0.8)]
    metrics = metric_set(build_cube({"d": Descriptor(queries)}))
    assert one(metrics, "true_map_micro") == pytest.approx(0.7667, abs=1e-4)
    assert one(metrics, "true_map_macro_by_scene") == pytest.approx(0.775, abs=1e-6)


def test_gtest_calculate_map_metrics_including_zero_queries() -> None:
    """CalculateMapMetricsIncludingZeroQueries: scene1 ranks 1 and 3; scene2 rank 5 and R = 0."""
    queries = [
        Query("scene1", 1.0, rank=1),
        Query("scene1", 1 / 3, rank=3),
        Query("scene2", 1 / 5, rank=5),
        Query("scene2", None),
    ]
    metrics = metric_set(build_cube({"d": Descriptor(queries)}))
    total = 1.0 + 1 / 3 + 1 / 5
    assert one(metrics, "true_map_micro") == pytest.approx(total / 3, abs=1e-6)
    assert one(metrics, "true_map_micro_including_zeros") == pytest.approx(total / 4, abs=1e-6)
    scene1, scene2 = (1.0 + 1 / 3) / 2, 1 / 5
    assert one(metrics, "true_map_macro_by_scene") == pytest.approx((scene1 + scene2) / 2, abs=1e-6)
    assert one(metrics, "true_map_macro_by_scene_including_zeros") == pytest.approx(
        (scene1 + (1 / 5) / 2) / 2, abs=1e-6
    )
    assert one(metrics, "hit_rate_at_1") == pytest.approx(1 / 3, abs=1e-6)
    assert one(metrics, "hit_rate_at_5") == pytest.approx(1.0, abs=1e-6)
    assert one(metrics, "hit_rate_at_10") == pytest.approx(1.0, abs=1e-6)


def test_gtest_calculate_precision_at_k() -> None:
    """CalculatePrecisionAtK: ranks {1, 3, 1, 5, -1, 2, 10, 1} (7 valid ranks, one R = 0)."""
    queries = [
        Query("s", None) if r < 0 else Query("s", 1 / r, rank=r) for r in (1, 3, 1, 5, -1, 2, 10, 1)
    ]
    metrics = metric_set(build_cube({"d": Descriptor(queries)}))
    assert one(metrics, "hit_rate_at_1") == pytest.approx(3 / 7, abs=1e-6)
    assert one(metrics, "hit_rate_at_5") == pytest.approx(6 / 7, abs=1e-6)
    assert one(metrics, "hit_rate_at_10") == pytest.approx(7 / 7, abs=1e-6)
    for k in (1, 5, 10):
        assert one(metrics, f"recall_at_{k}") == one(metrics, f"hit_rate_at_{k}")
    for k, hits in ((1, 3), (5, 6), (10, 7)):  # precision at k: hits / k, not a hit rate
        assert one(metrics, f"precision_at_{k}") == pytest.approx(hits / 7 / k, abs=1e-12)


def test_gtest_true_map_including_zeros() -> None:
    """TrueMAPIncludingZeros: scene1 AP 0.8 and one R = 0; scene2 AP 0.8."""
    queries = [Query("scene1", 0.8), Query("scene1", None), Query("scene2", 0.8)]
    metrics = metric_set(build_cube({"d": Descriptor(queries)}))
    assert one(metrics, "true_map_micro") == pytest.approx(0.8, abs=1e-6)
    assert one(metrics, "true_map_micro_including_zeros") == pytest.approx(0.533333, abs=1e-6)


def test_gtest_image_retrieval_map() -> None:
    """ExperimentMetricsImageRetrievalTest: ComputesAverageFromQueries (APs 1.0, 0.5, 0.25) and
    DefaultsToSentinelWhenNoQueries (DW: -1.0; metricalc: NaN, no image_retrieval_ap)."""
    cube = build_cube({"d": Descriptor(image_retrieval_ap=[1.0, 0.5, 0.25])})
    assert one(metric_set(cube), "image_retrieval_map") == pytest.approx(1.75 / 3, abs=1e-6)
    assert cube.sizes["sequence"] == 3  # image_retrieval_queries
    empty = build_cube({"d": Descriptor()})
    assert math.isnan(one(metric_set(empty, zero_division=0), "image_retrieval_map"))


# --------------------------------------------------------------------------------------------
# 2. A line-by-line port of ExperimentMetrics, and a randomized differential test
# --------------------------------------------------------------------------------------------


def scene_means_sum(per_scene):
    """The sum of the scenes' means (in scene order) and how many scenes have values: the
    seed's macro average over the non-empty scenes."""
    total, count = 0.0, 0
    for scene in sorted(per_scene):
        values = per_scene[scene]
        if not values:
            continue
        total += sum(values) / len(values)
        count += 1
    return total, count


class WorkbenchMetrics:
    """Python port of DescriptorWorkbench's ``ExperimentMetrics`` (the parts metric_set
    computes), statement by statement; std::map iterates in key order, so every map here is
    iterated sorted."""

    def __init__(self) -> None:
        self.precisions_per_image: list[float] = []
        self.total_matches = 0
        self.total_keypoints = 0
        self.total_images_processed = 0
        self.per_scene_precisions: dict[str, list[float]] = defaultdict(list)
        self.ap_per_query: list[float] = []
        self.per_scene_ap: dict[str, list[float]] = defaultdict(list)
        self.per_scene_excluded: dict[str, int] = defaultdict(int)
        self.total_queries_processed = 0
        self.total_queries_excluded = 0
        self.viewpoint_scene_ap: dict[str, list[float]] = defaultdict(list)
        self.illumination_scene_ap: dict[str, list[float]] = defaultdict(list)
        self.viewpoint_scene_excluded: dict[str, int] = defaultdict(int)
        self.illumination_scene_excluded: dict[str, int] = defaultdict(int)
        self.image_retrieval_ap_per_query: list[float] = []
        self.ranks_per_query: list[int] = []
        self.calculate_mean_precision()

    # -- accumulation --------------------------------------------------------------------------

    def add_image_result(self, scene: str, precision: float, matches: int, keypoints: int) -> None:
        self.precisions_per_image.append(precision)
        self.total_matches += matches
        self.total_keypoints += keypoints
        self.total_images_processed += 1
        self.per_scene_precisions[scene].append(precision)

    def add_query_ap(self, scene: str, has_potential_match: bool, ap: float, rank: int) -> None:
        if has_potential_match:
            self.ap_per_query.append(ap)
            self.per_scene_ap[scene].append(ap)
            self.ranks_per_query.append(rank)
            self.total_queries_processed += 1
            if scene:
                if scene[0] == "v":
                    self.viewpoint_scene_ap[scene].append(ap)
                elif scene[0] == "i":
                    self.illumination_scene_ap[scene].append(ap)
        else:
            self.total_queries_excluded += 1
            self.per_scene_excluded[scene] += 1
            self.ranks_per_query.append(-1)
            if scene:
                if scene[0] == "v":
                    self.viewpoint_scene_excluded[scene] += 1
                elif scene[0] == "i":
                    self.illumination_scene_excluded[scene] += 1

    def add_image_retrieval_ap(self, ap: float) -> None:
        self.image_retrieval_ap_per_query.append(ap)

    def merge(self, other: WorkbenchMetrics) -> None:
        self.precisions_per_image.extend(other.precisions_per_image)
        self.total_matches += other.total_matches
        self.total_keypoints += other.total_keypoints
        self.total_images_processed += other.total_images_processed
        self.total_queries_processed += other.total_queries_processed
        self.total_queries_excluded += other.total_queries_excluded
        for scene in sorted(other.per_scene_precisions):
            self.per_scene_precisions[scene].extend(other.per_scene_precisions[scene])
        self.ap_per_query.extend(other.ap_per_query)
        for scene in sorted(other.per_scene_ap):
            self.per_scene_ap[scene].extend(other.per_scene_ap[scene])
        for scene in sorted(other.per_scene_excluded):
            self.per_scene_excluded[scene] += other.per_scene_excluded[scene]
        self.ranks_per_query.extend(other.ranks_per_query)
        for scene in sorted(other.viewpoint_scene_ap):
            self.viewpoint_scene_ap[scene].extend(other.viewpoint_scene_ap[scene])
        for scene in sorted(other.illumination_scene_ap):
            self.illumination_scene_ap[scene].extend(other.illumination_scene_ap[scene])
        for scene in sorted(other.viewpoint_scene_excluded):
            self.viewpoint_scene_excluded[scene] += other.viewpoint_scene_excluded[scene]
        for scene in sorted(other.illumination_scene_excluded):
            self.illumination_scene_excluded[scene] += other.illumination_scene_excluded[scene]
        self.image_retrieval_ap_per_query.extend(other.image_retrieval_ap_per_query)

    # -- calculateMeanPrecision ----------------------------------------------------------------

    @staticmethod
    def _category(ap_map: dict[str, list[float]]) -> float:
        total, count = scene_means_sum(ap_map)  # the same loop over the scenes in order
        return total / count if count > 0 else 0.0

    @staticmethod
    def _category_including_zeros(
        ap_map: dict[str, list[float]], excluded_map: dict[str, int]
    ) -> float:
        total, count = 0.0, 0
        for scene in sorted(set(ap_map) | set(excluded_map)):
            aps = ap_map.get(scene, [])
            scene_total = len(aps) + excluded_map.get(scene, 0)
            if scene_total == 0:
                continue
            total += sum(aps) / scene_total
            count += 1
        return total / count if count > 0 else 0.0

    def calculate_mean_precision(self) -> None:
        self.mean_precision = 0.0
        self.legacy_macro_precision_by_scene = 0.0
        self.true_map_micro = 0.0
        self.true_map_macro_by_scene = 0.0
        self.true_map_micro_including_zeros = 0.0
        self.true_map_macro_by_scene_including_zeros = 0.0
        self.precision_at = {1: 0.0, 5: 0.0, 10: 0.0}
        if self.precisions_per_image:
            self.mean_precision = sum(self.precisions_per_image) / len(self.precisions_per_image)
        if self.per_scene_precisions:
            total, count = scene_means_sum(self.per_scene_precisions)
            self.legacy_macro_precision_by_scene = total / count if count else self.mean_precision
        else:
            self.legacy_macro_precision_by_scene = self.mean_precision
        if self.ap_per_query:
            self.true_map_micro = sum(self.ap_per_query) / len(self.ap_per_query)
        if self.per_scene_ap:
            total, count = scene_means_sum(self.per_scene_ap)
            if count > 0:
                self.true_map_macro_by_scene = total / count
        else:
            self.true_map_macro_by_scene = self.true_map_micro
        all_queries = self.total_queries_processed + self.total_queries_excluded
        if all_queries > 0:
            self.true_map_micro_including_zeros = sum(self.ap_per_query) / all_queries
        if self.per_scene_ap:
            total, count = 0.0, 0
            for scene in sorted(self.per_scene_ap):
                aps = self.per_scene_ap[scene]
                scene_total = len(aps) + self.per_scene_excluded.get(scene, 0)
                if scene_total == 0:
                    continue
                total += sum(aps) / scene_total
                count += 1
            if count > 0:
                self.true_map_macro_by_scene_including_zeros = total / count
        else:
            self.true_map_macro_by_scene_including_zeros = self.true_map_micro_including_zeros
        self.viewpoint_map = self._category(self.viewpoint_scene_ap)
        self.illumination_map = self._category(self.illumination_scene_ap)
        self.viewpoint_map_including_zeros = self._category_including_zeros(
            self.viewpoint_scene_ap, self.viewpoint_scene_excluded
        )
        self.illumination_map_including_zeros = self._category_including_zeros(
            self.illumination_scene_ap, self.illumination_scene_excluded
        )
        valid = [r for r in self.ranks_per_query if r > 0]
        if valid:
            for k in self.precision_at:
                self.precision_at[k] = sum(r <= k for r in valid) / len(valid)
        self.image_retrieval_map = (
            sum(self.image_retrieval_ap_per_query) / len(self.image_retrieval_ap_per_query)
            if self.image_retrieval_ap_per_query
            else -1.0
        )


SCENE_POOL = ("v_wall", "v_bird", "i_dome", "i_ski", "vase", "indoor", "x_other", "boat")


def workbench_rank(better: int, ties: int) -> int:
    """Rank of the tie policy ``workbench`` (docs/protocols.md, protocol 1)."""
    return 1 + better + (ties + 1) // 2


def random_cube(rng: np.random.Generator) -> tuple[xr.Dataset, dict[str, WorkbenchMetrics]]:
    """Two descriptors over random scenes / image pairs / queries, and the ported
    ExperimentMetrics of each, fed as processSingleScene and processDirectoryNew feed it."""
    n_scenes = int(rng.integers(0, 6))
    scenes = sorted(rng.choice(SCENE_POOL, size=n_scenes, replace=False).tolist())
    rows: list[dict] = []
    for scene in scenes:
        all_r0 = rng.random() < 0.2  # a scene whose queries all have R = 0
        for k in range(2, 2 + int(rng.integers(1, 4))):
            n_candidates = int(rng.integers(1, 30))
            for _ in range(int(rng.integers(1, 8))):
                rows.append({"scene": scene, "pair": f"1-{k}", "n_candidates": n_candidates,
                             "all_r0": all_r0})  # fmt: skip
    width = len(rows)
    names = ["a", "b"]
    n_relevant = np.full((2, width), -1, np.int8)
    better = np.full((2, width), -1, np.int64)
    ties = np.full((2, width), -1, np.int64)
    nn_correct = np.full((2, width), -1, np.int8)
    nn_mutual = np.full((2, width), -1, np.int8)
    n_cand = np.full((2, width), -1, np.int64)
    for i in range(2):
        for j, row in enumerate(rows):
            if rng.random() < 0.15:
                continue  # the descriptor lacks this query (native keypoints)
            r1 = not row["all_r0"] and rng.random() < 0.75
            n_relevant[i, j] = int(r1)
            if r1:
                better[i, j] = int(rng.integers(0, 12))
                ties[i, j] = int(rng.choice([0, 0, 1, 2, 3]))
            nn_correct[i, j] = int(r1 and rng.random() < 0.5)
            nn_mutual[i, j] = int(rng.random() < 0.6)
            n_cand[i, j] = row["n_candidates"]
    rank = np.where(better >= 0, 1 + better + (ties + 1) // 2, -1)
    ap = np.where(n_relevant == 1, 1.0 / np.maximum(rank, 1), np.nan)
    # image retrieval: one query per scene (sequence), some without a relevant image (AP
    # undefined: DescriptorWorkbench's 0), some scenes without a query (-1)
    n_images = [int(rng.integers(0, 4)) for _ in range(2)]
    retrieval = np.full((2, max(n_images)), np.nan)
    retrieval_relevant = np.full((2, max(n_images)), -1, np.int64)
    for i, n in enumerate(n_images):
        retrieval_relevant[i, :n] = rng.choice([0, 1, 5], size=n)
        retrieval[i, :n] = np.where(retrieval_relevant[i, :n] > 0, rng.random(n), np.nan)
    two = ("descriptor", "query")
    scene_coord = np.array([r["scene"] for r in rows], dtype=str)
    cube = xr.Dataset(
        {
            "n_relevant": (two, n_relevant),
            "better": (two, better),
            "ties": (two, ties),
            "ap": (two, ap),
            "nn_correct": (two, nn_correct),
            "nn_mutual": (two, nn_mutual),
            "n_candidates": (two, n_cand),
            "image_retrieval_ap": (("descriptor", "sequence"), retrieval),
            "image_retrieval_relevant": (("descriptor", "sequence"), retrieval_relevant),
        },
        coords={
            "descriptor": names,
            "scene": ("query", scene_coord),
            "split": ("query", np.full(width, "other")),
            "pair": ("query", np.array([r["pair"] for r in rows], dtype=str)),
        },
        attrs={"tie_policy": "workbench", "ap_method": "ir"},
    )
    ported = {}
    for i, name in enumerate(names):
        overall = WorkbenchMetrics()
        for scene in scenes:  # processSingleScene: one ExperimentMetrics per scene
            per_scene = WorkbenchMetrics()
            pairs = sorted({r["pair"] for r in rows if r["scene"] == scene})
            for pair in pairs:
                js = [j for j, r in enumerate(rows) if r["scene"] == scene and r["pair"] == pair]
                js = [j for j in js if n_relevant[i, j] >= 0]
                matches = int(sum(nn_mutual[i, j] == 1 for j in js))
                if matches:  # addImageResult only for a pair with matches
                    correct = sum(nn_correct[i, j] == 1 for j in js)
                    per_scene.add_image_result(scene, correct / len(js), matches,
                                               rows[js[0]]["n_candidates"])  # fmt: skip
                for j in js:
                    r1 = bool(n_relevant[i, j] == 1)
                    q_rank = workbench_rank(int(better[i, j]), int(ties[i, j])) if r1 else -1
                    per_scene.add_query_ap(scene, r1, 1.0 / q_rank if r1 else 0.0, q_rank)
            per_scene.calculate_mean_precision()
            overall.merge(per_scene)
        overall.calculate_mean_precision()
        for value in retrieval[i, : n_images[i]]:  # computeAveragePrecision: 0 without relevant
            overall.add_image_retrieval_ap(0.0 if math.isnan(value) else float(value))
        overall.calculate_mean_precision()
        ported[name] = overall
    return cube, ported


COMPARED = (
    "true_map_micro",
    "true_map_macro_by_scene",
    "true_map_micro_including_zeros",
    "true_map_macro_by_scene_including_zeros",
    "viewpoint_map",
    "illumination_map",
    "viewpoint_map_including_zeros",
    "illumination_map_including_zeros",
)


@pytest.mark.parametrize("seed", range(60))
def test_metric_set_equals_the_ported_experiment_metrics(seed: int) -> None:
    cube, ported = random_cube(np.random.default_rng(seed))
    metrics = metric_set(cube, zero_division=0)
    for name, dw in ported.items():
        for metric in COMPARED:
            assert one(metrics, metric, name) == pytest.approx(
                getattr(dw, metric), rel=1e-12, abs=1e-15
            ), (seed, name, metric)
        for k, value in dw.precision_at.items():
            # DescriptorWorkbench's precision_at_k is the metric set's hit rate
            assert one(metrics, f"hit_rate_at_{k}", name) == pytest.approx(value, rel=1e-12)
        assert int(metrics.total_matches.sel(descriptor=name)) == dw.total_matches
        assert int(metrics.total_keypoints.sel(descriptor=name)) == dw.total_keypoints
        assert int(metrics.total_queries_processed.sel(descriptor=name)) == (
            dw.total_queries_processed
        )
        assert int(metrics.total_queries_excluded.sel(descriptor=name)) == (
            dw.total_queries_excluded
        )
        expected_retrieval = math.nan if dw.image_retrieval_map == -1.0 else dw.image_retrieval_map
        assert one(metrics, "image_retrieval_map", name) == pytest.approx(
            expected_retrieval, rel=1e-12, nan_ok=True
        )


def test_the_differential_test_covers_the_edge_cases() -> None:
    """The random cubes include empty cubes, scenes whose queries all have R = 0, empty
    splits, ties, names outside v_/i_ and image-retrieval queries without a relevant image (so
    the test above can fail on each)."""
    seen = defaultdict(bool)
    for seed in range(60):
        cube, ported = random_cube(np.random.default_rng(seed))
        seen["empty"] |= cube.sizes["query"] == 0
        seen["ties"] |= bool((cube.ties > 0).any())
        seen["retrieval_query_without_relevant"] |= bool((cube.image_retrieval_relevant == 0).any())
        for dw in ported.values():
            all_r0 = set(dw.per_scene_excluded) - set(dw.per_scene_ap)
            seen["all_r0_scene"] |= bool(all_r0)
            seen["all_r0_viewpoint"] |= any(s[0] == "v" for s in all_r0)
            seen["no_viewpoint"] |= not dw.viewpoint_scene_ap and not dw.viewpoint_scene_excluded
            seen["other_letter"] |= any(s[0] not in "vi" for s in dw.per_scene_ap)
            seen["macro_differs_from_micro"] |= dw.viewpoint_map > 0 and not math.isclose(
                dw.viewpoint_map,
                sum(sum(v) for v in dw.viewpoint_scene_ap.values())
                / sum(len(v) for v in dw.viewpoint_scene_ap.values()),
            )
    assert all(seen.values()) and len(seen) == 8, dict(seen)


# --------------------------------------------------------------------------------------------
# 3. The real DescriptorWorkbench export
# --------------------------------------------------------------------------------------------


def export_rows() -> pd.DataFrame:
    frame = pd.read_csv(PERFORMANCE)
    assert len(frame) == 42
    return frame


def scene_table(metadata: str) -> pd.DataFrame:
    """The per-scene metadata of one row: true_map, true_map_with_zeros, query_count,
    excluded_count over scene names."""
    meta = parse_metadata(metadata)
    scenes = sorted(k.removesuffix("_query_count") for k in meta if k.endswith("_query_count"))
    return pd.DataFrame(
        {
            key: [meta[f"{s}_{key}"] for s in scenes]
            for key in ("true_map", "true_map_with_zeros", "query_count", "excluded_count")
        },
        index=pd.Index(scenes, name="scene"),
    )


def test_real_export_scene_means_equal_the_exported_columns() -> None:
    """On all 42 rows: the DescriptorWorkbench means over scenes, from the 6-decimal per-scene
    metadata, equal the exported full-precision columns within the rounding (5e-7), and the
    store's recomputation (what `metricalc db import-workbench` stores) is the same means."""
    export = read_workbench(PERFORMANCE)
    differs = 0
    for index, row in export_rows().iterrows():
        s = scene_table(row.metadata)
        has_r1 = s.query_count > 0
        macro = s.true_map[has_r1].mean()
        macro_zeros = s.true_map_with_zeros[has_r1].mean()
        assert abs(row.true_map_macro - macro) <= MAP_TOLERANCE
        assert abs(row.true_map_macro_with_zeros - macro_zeros) <= MAP_TOLERANCE
        stored = export.recomputed[index + 2]  # file line
        assert stored["true_map_macro_with_zeros"] == pytest.approx(macro_zeros, abs=1e-15)
        for split, letter in (("viewpoint", "v"), ("illumination", "i")):
            part = s[s.index.str[0] == letter]
            assert stored[f"{split}_map"] == pytest.approx(
                part.true_map[part.query_count > 0].mean(), abs=1e-15
            )
            assert stored[f"{split}_map_including_zeros"] == pytest.approx(
                part.true_map_with_zeros[part.query_count + part.excluded_count > 0].mean(),
                abs=1e-15,
            )
            micro = (part.true_map * part.query_count).sum() / part.query_count.sum()
            assert stored[f"{split}_map_micro"] == pytest.approx(micro, abs=1e-15)
        # the scene mean and the query-weighted mean differ beyond the rounding on every row
        differs += any(
            abs(stored[f"{split}_map"] - stored[f"{split}_map_micro"]) > 2 * MAP_TOLERANCE
            for split in ("viewpoint", "illumination")
        )
    assert differs == 42


def export_cube() -> xr.Dataset:
    """A QueryCube with the per-scene sums of every export row: a scene with q R = 1 and e R = 0
    queries becomes q/g and e/g queries (g = gcd(q, e)), each R = 1 query with AP = the
    scene's true_map, so the scene's mAP is true_map and its mAP with zeros true_map q / (q + e)
    (the query-weighted micro means are not kept: the scenes' weights change). The 42 rows
    share their per-scene counts (locked keypoints), so they share the queries."""
    rows = export_rows()
    tables = [scene_table(text) for text in rows.metadata]
    counts = tables[0][["query_count", "excluded_count"]]
    for table in tables[1:]:
        assert table[["query_count", "excluded_count"]].equals(counts)
    scene, relevant, source = [], [], []
    for position, (name, q, e) in enumerate(counts.itertuples()):
        g = math.gcd(q, e)
        scene += [name] * ((q + e) // g)
        relevant += [1] * (q // g) + [0] * (e // g)
        source += [position] * ((q + e) // g)
    relevant_arr = np.array(relevant, np.int8)
    maps = np.array([t.true_map.to_numpy() for t in tables])  # (row, scene)
    ap = np.where(relevant_arr == 1, maps[:, source], np.nan)
    shape = ap.shape
    two = ("descriptor", "query")
    return xr.Dataset(
        {
            "n_relevant": (two, np.broadcast_to(relevant_arr, shape).copy()),
            "better": (two, np.where(relevant_arr == 1, 0, -1) * np.ones(shape, np.int64)),
            "ties": (two, np.where(relevant_arr == 1, 0, -1) * np.ones(shape, np.int64)),
            "ap": (two, ap),
            "nn_correct": (two, np.zeros(shape, np.int8)),
        },
        coords={
            "descriptor": [f"dw-{i}" for i in rows.experiment_id],
            "scene": ("query", np.array(scene)),
            "split": ("query", np.array(["other"] * len(scene))),
            "pair": ("query", np.array(["1-2"] * len(scene))),
        },
        attrs={"tie_policy": "workbench"},
    )


def test_real_export_metric_set_equals_the_exported_columns() -> None:
    """metric_set on the export's per-scene sums: true_map_macro_by_scene(_including_zeros)
    equal the exported true_map_macro(_with_zeros) within the metadata's rounding, and the split
    mAPs equal the means of the per-scene metadata (the export has no split columns)."""
    rows = export_rows()
    metrics = metric_set(export_cube())
    for _, row in rows.iterrows():
        name = f"dw-{row.experiment_id}"
        s = scene_table(row.metadata)
        assert abs(one(metrics, "true_map_macro_by_scene", name) - row.true_map_macro) <= (
            MAP_TOLERANCE
        )
        assert (
            abs(
                one(metrics, "true_map_macro_by_scene_including_zeros", name)
                - row.true_map_macro_with_zeros
            )
            <= MAP_TOLERANCE
        )
        for split, letter in (("viewpoint", "v"), ("illumination", "i")):
            part = s[s.index.str[0] == letter]
            assert one(metrics, f"{split}_map", name) == pytest.approx(
                part.true_map.mean(), abs=1e-12
            )
            # true_map q / (q + e) from the 6-decimal true_map vs the 6-decimal with_zeros
            assert (
                abs(
                    one(metrics, f"{split}_map_including_zeros", name)
                    - part.true_map_with_zeros.mean()
                )
                <= 2 * MAP_TOLERANCE
            )
