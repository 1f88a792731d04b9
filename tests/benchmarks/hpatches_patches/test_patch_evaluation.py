"""Patch and image retrieval AP over ranks 2..51 (docs/protocols.md, protocol 6): hand-computed tiny
benchmarks, oracle results on the real ECCV 2016 files, and the wiring of every AP method."""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import islice
from pathlib import Path

import numpy as np
import pytest

import metricalc as mc
import metricalc.benchmarks.hpatches_patches as mp
from metricalc.errors import InvalidInputError
from tests.data_files import HPATCHES_RETRIEVAL

DATA = HPATCHES_RETRIEVAL

POOL = ("a.ref", "a.e1", "a.e2", "a.e3", "b.ref", "b.e1")


def listed(query: str, *head: str) -> list[str]:
    """51 results: the query, ``head`` (ranks 2..), then distinct patches that are relevant to
    no query of the tiny benchmark (image ``b.e1`` for ``a`` queries, ``a.e3`` for ``b``)."""
    filler = "b.e1" if query.startswith("a.") else "a.e3"
    return [query, *head, *(f"{filler}.{500 + k}" for k in range(50 - len(head)))]


# query, its cluster, its results, expected patch AP, expected image AP (repeats="count"),
# the same two with repeats="negative".
TINY = [
    # patch matches at 1 and 4; an image-only match (a.e2.7) at 3
    (
        "a.ref.0",
        ("a.ref.0", "a.e1.0", "a.e2.0"),
        listed("a.ref.0", "a.e1.0", "b.ref.5", "a.e2.7", "a.e2.0"),
        (1 + 2 / 4) / 2,
        (1 + 2 / 3 + 3 / 4) / 3,
        (1 + 2 / 4) / 2,
        (1 + 2 / 3 + 3 / 4) / 3,
    ),
    # nothing relevant in the list: AP 0 for both tasks
    ("a.ref.1", ("a.ref.1", "a.e1.1"), listed("a.ref.1"), 0.0, 0.0, 0.0, 0.0),
    # image but not patch: other patches of the query's own image and of a cluster image
    (
        "b.ref.2",
        ("b.ref.2", "b.e1.2"),
        listed("b.ref.2", "a.e3.9", "b.ref.9", "a.e3.8", "b.e1.3"),
        0.0,
        (1 / 2 + 2 / 4) / 2,
        0.0,
        (1 / 2 + 2 / 4) / 2,
    ),
    # same sequence and index, but an image outside the cluster's images: not relevant
    (
        "a.ref.3",
        ("a.ref.3", "a.e1.3"),
        listed("a.ref.3", "a.e3.3", "a.e1.3", "a.e2.8"),
        1 / 2,
        1 / 2,
        1 / 2,
        1 / 2,
    ),
    # repeats: a cluster member twice, then the query again
    (
        "b.ref.4",
        ("b.ref.4", "b.e1.4"),
        listed("b.ref.4", "a.e3.50", "b.e1.4", "b.e1.4", "b.ref.4"),
        (1 / 2 + 2 / 3 + 3 / 4) / 3,
        (1 / 2 + 2 / 3 + 3 / 4) / 3,
        1 / 2,
        1 / 2,
    ),
]


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path, Path]:
    header = ",".join(POOL)
    bench = tmp_path / "tiny.benchmark"
    bench.write_text("\n".join([header, *(case[0] for case in TINY)]) + "\n")
    labels = tmp_path / "tiny.labels"
    labels.write_text("\n".join([header, *(",".join(case[1]) for case in TINY)]) + "\n")
    results = mp.write_results(tmp_path / "tiny.results", POOL, [case[2] for case in TINY])
    return bench, labels, results


def test_tiny_benchmark_known_aps(tiny: tuple[Path, Path, Path]) -> None:
    ds = mp.evaluate_files(*tiny)
    patch = [case[3] for case in TINY]
    image = [case[4] for case in TINY]
    np.testing.assert_allclose(ds.patch_retrieval_ap, patch, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds.image_retrieval_ap, image, rtol=0, atol=1e-12)
    assert float(ds.patch_retrieval_map) == pytest.approx(np.mean(patch), abs=1e-12)
    assert float(ds.image_retrieval_map) == pytest.approx(np.mean(image), abs=1e-12)
    assert int(ds.n_queries) == len(TINY)
    assert ds.n_patch_relevant.values.tolist() == [2, 0, 0, 1, 3]
    assert ds.n_image_relevant.values.tolist() == [3, 0, 2, 1, 3]
    assert ds.signature.values.tolist() == [case[0] for case in TINY]
    assert ds.sequence.values.tolist() == ["a", "a", "b", "a", "b"]
    assert ds.attrs["ap_method"] == "vlfeat" and ds.attrs["ranks"] == "2..51"
    assert ds.attrs["benchmark"] == str(tiny[0]) and ds.attrs["results"] == str(tiny[2])


def test_tiny_benchmark_repeats_negative(tiny: tuple[Path, Path, Path]) -> None:
    ds = mp.evaluate_files(*tiny, repeats="negative")
    np.testing.assert_allclose(ds.patch_retrieval_ap, [c[5] for c in TINY], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds.image_retrieval_ap, [c[6] for c in TINY], rtol=0, atol=1e-12)
    assert ds.attrs["repeats"] == "negative"


def test_relevance_matrices(tiny: tuple[Path, Path, Path]) -> None:
    bench, labels, results = (f(p) for f, p in zip(READERS, tiny, strict=True))
    patch, image = mp.relevance(bench, labels, results)
    assert patch.shape == image.shape == (len(TINY), 50)
    assert patch.dtype == image.dtype == bool
    assert np.flatnonzero(patch[0]).tolist() == [0, 3]
    assert np.flatnonzero(image[0]).tolist() == [0, 2, 3]
    assert np.flatnonzero(image[2]).tolist() == [1, 3]
    assert np.flatnonzero(patch[4]).tolist() == [1, 2, 3]
    assert not (patch & ~image).any()  # a patch match is always an image match
    patch, image = mp.relevance(bench, labels, results, repeats="negative")
    assert np.flatnonzero(patch[4]).tolist() == np.flatnonzero(image[4]).tolist() == [1]


def test_invalid_inputs_are_refused(tiny: tuple[Path, Path, Path], tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="ap_method must be one of"):
        mp.evaluate_files(*tiny, ap_method="auc")
    with pytest.raises(InvalidInputError, match="repeats must be one of"):
        mp.evaluate_files(*tiny, repeats="ignore")  # type: ignore[arg-type]
    rows = [case[2] for case in TINY]
    rows[3] = rows[3][:50]
    bad = mp.write_results(tmp_path / "bad.results", POOL, rows)
    with pytest.raises(
        InvalidInputError, match=rf"^{re.escape(str(bad))}, line 5: expected exactly 51 results"
    ):
        mp.evaluate_files(tiny[0], tiny[1], bad)


READERS = (mp.read_benchmark, mp.read_labels, mp.read_results)


# -- the real files: oracle results ---------------------------------------------------------------


def oracle_rows(benchmark: mp.Benchmark, labels: mp.Labels, *, last: bool = False) -> list:
    """Per query: the query, the rest of its cluster, then 45 distractors (cluster members of
    queries of other sequences, so relevant for neither task); ``last`` puts the cluster after
    the distractors instead."""
    by_sequence: dict[str, list[str]] = defaultdict(list)
    for cluster in labels.clusters:
        by_sequence[cluster[0].partition(".")[0]].extend(cluster)
    distractors: dict[str, list[str]] = {}  # per sequence: the first 45 of other sequences
    for sequence in by_sequence:
        others = (s for seq, sigs in by_sequence.items() if seq != sequence for s in sigs)
        distractors[sequence] = list(dict.fromkeys(islice(others, 45)))
    rows = []
    for query, cluster in zip(benchmark.queries, labels.clusters, strict=True):
        rest = [s for s in cluster if s != query]
        others = distractors[query.partition(".")[0]]
        assert len(rest) == 5 and len(others) == 45
        rows.append([query, *others, *rest] if last else [query, *rest, *others])
    return rows


def real(name: str) -> tuple[mp.Benchmark, mp.Labels]:
    return mp.read_benchmark(DATA / f"{name}.benchmark"), mp.read_labels(DATA / f"{name}.labels")


@pytest.mark.parametrize("name", ["train_example", "train_easy_5s_00", "train_hard_5s_01"])
def test_oracle_results_score_one(name: str, tmp_path: Path) -> None:
    benchmark, labels = real(name)
    path = mp.write_results(
        tmp_path / f"{name}.results", benchmark.pool, oracle_rows(benchmark, labels)
    )
    ds = mp.evaluate_files(DATA / f"{name}.benchmark", DATA / f"{name}.labels", path)
    assert int(ds.n_queries) == len(benchmark.queries)
    assert float(ds.patch_retrieval_map) == 1.0
    assert float(ds.image_retrieval_map) == 1.0
    assert (ds.n_patch_relevant == 5).all() and (ds.n_image_relevant == 5).all()


def test_cluster_ranked_last_on_real_files() -> None:
    benchmark, labels = real("train_example")
    results = mp.Results(
        benchmark.pool, tuple(map(tuple, oracle_rows(benchmark, labels, last=True)))
    )
    ds = mp.evaluate_results(benchmark, labels, results)
    expected = np.mean([k / (45 + k) for k in range(1, 6)])
    np.testing.assert_allclose(ds.patch_retrieval_ap, expected, rtol=1e-12)
    np.testing.assert_allclose(ds.image_retrieval_ap, expected, rtol=1e-12)


# -- the wiring of every AP method ----------------------------------------------------------------


def shuffled_results(benchmark: mp.Benchmark, labels: mp.Labels, seed: int) -> mp.Results:
    """The oracle lists with ranks 2..51 shuffled, and some positions replaced by other patches
    of the query's own sequence (image matches that are not patch matches)."""
    rng = np.random.default_rng(seed)
    rows = []
    for row in oracle_rows(benchmark, labels):
        tail = list(rng.permutation(row[1:]))
        sequence = row[0].partition(".")[0]
        for j in rng.choice(50, size=rng.integers(0, 8), replace=False):
            tail[j] = f"{sequence}.ref.{90000 + j}"
        if rng.random() < 0.1:  # a list with neither patch nor image match
            tail = [s for s in row[1:] if not s.startswith(sequence + ".")]
            tail += [tail[0]] * (50 - len(tail))
        rows.append((row[0], *tail))
    return mp.Results(benchmark.pool, tuple(rows))


def loop_relevance(labels: mp.Labels, results: mp.Results) -> tuple[np.ndarray, np.ndarray]:
    """Relevance built one result at a time, independently of :func:`mp.relevance`."""
    patch, image = [], []
    for cluster, row in zip(labels.clusters, results.results, strict=True):
        images = {s.rsplit(".", 1)[0] for s in cluster}
        patch.append([s in cluster for s in row[1:]])
        image.append([s.rsplit(".", 1)[0] in images for s in row[1:]])
    return np.array(patch), np.array(image)


def vl_pr_ap(relevant: list[bool]) -> float:
    """VLFeat ``vl_pr`` AP of a list in its order: mean precision at each positive, 0 if none."""
    hits, total = 0, 0.0
    for rank, rel in enumerate(relevant, start=1):
        if rel:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


@pytest.mark.parametrize("method", mc.AP_METHODS)
def test_every_ap_method_matches_average_precision(method: str) -> None:
    benchmark, labels = real("train_example")
    results = shuffled_results(benchmark, labels, seed=7)
    ds = mp.evaluate_results(benchmark, labels, results, ap_method=method)
    assert ds.attrs["ap_method"] == method
    patch, image = loop_relevance(labels, results)
    assert not patch.all(axis=1).any() and (~image).all(axis=1).any()
    score = np.tile(np.arange(50, 0, -1), (len(patch), 1))
    for name, rel in (("patch", patch), ("image", image)):
        expected = mc.average_precision(rel, score, method=method, zero_division=0)
        np.testing.assert_allclose(ds[f"{name}_retrieval_ap"], expected, rtol=0, atol=1e-12)
        assert float(ds[f"{name}_retrieval_map"]) == pytest.approx(np.mean(expected), abs=1e-12)
        if method == "vlfeat":
            reference = [vl_pr_ap(list(r)) for r in rel]
            np.testing.assert_allclose(ds[f"{name}_retrieval_ap"], reference, rtol=0, atol=1e-12)


def test_large_real_benchmark() -> None:
    """A 4000-query benchmark goes through the vectorized path in one call per task."""
    benchmark, labels = real("train_hard_40s_00")
    results = mp.Results(benchmark.pool, tuple(map(tuple, oracle_rows(benchmark, labels))))
    ds = mp.evaluate_results(benchmark, labels, results)
    assert int(ds.n_queries) == 4000
    assert float(ds.patch_retrieval_map) == float(ds.image_retrieval_map) == 1.0
