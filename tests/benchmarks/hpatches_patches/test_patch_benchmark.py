"""make-benchmark: the structure of the drawn tasks, checked independently of the generator, and
compared with the files of the ECCV 2016 release."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

import metricalc.benchmarks.hpatches_patches as mp
from metricalc.benchmarks.hpatches_patches.benchmark import benchmark_name, make_benchmark
from metricalc.benchmarks.hpatches_patches.dataset import (
    ECCV2016_SPLITS,
    read_patch_dataset,
    write_patches,
)
from metricalc.errors import InvalidInputError
from tests.cli_helpers import run_cli
from tests.data_files import HPATCHES_RETRIEVAL

DATA = HPATCHES_RETRIEVAL
ALL = ("ref", *(f"{level}{k}" for level in "eht" for k in range(1, 6)))


def structure(benchmark: mp.Benchmark, labels: mp.Labels) -> dict:
    """What the release's files have in common, computed from the file contents alone."""
    sequences = list(dict.fromkeys(name.split(".")[0] for name in benchmark.pool))
    images = [tuple(n.split(".")[1] for n in benchmark.pool if n.startswith(f"{s}.")) for s in
              sequences]  # fmt: skip
    queries = [mp.parse_signature(q) for q in benchmark.queries]
    clusters_ok = all(
        [mp.parse_signature(m) for m in cluster]
        == [mp.Signature(q.sequence, image, q.index) for image in images[0]]
        for q, cluster in zip(queries, labels.clusters, strict=True)
    )
    return {
        "images per sequence": set(images),
        "pool grouped by sequence": benchmark.pool
        == tuple(f"{s}.{i}" for s, imgs in zip(sequences, images, strict=True) for i in imgs),
        "queries per sequence": len(queries) / len(sequences),
        "queries from ref": {q.image for q in queries},
        "distinct queries": len(set(benchmark.queries)) == len(queries),
        "every pool sequence queried": {q.sequence for q in queries} == set(sequences),
        "cluster = query index in the pool images": clusters_ok,
        "labels header": labels.pool == benchmark.pool,
    }


@pytest.fixture(scope="module")
def fake_release(tmp_path_factory):
    """A dataset named like the release (no splits.json: the ECCV 2016 split applies), every
    sequence with ref, e, h and t images, uneven patch counts (the pixels do not matter)."""
    root = tmp_path_factory.mktemp("release")
    rng = np.random.default_rng(0)
    names = ECCV2016_SPLITS["train"][:7] + ECCV2016_SPLITS["test"][:3]
    for name in names:
        n = int(rng.integers(120, 400))
        patches = np.zeros((n, 65, 65), np.uint8)
        for image in ALL:
            write_patches(root / name / f"{image}.png", patches)
    return read_patch_dataset(root)


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_the_drawn_task_has_the_release_structure(fake_release, tmp_path, difficulty):
    bench_path, labels_path = make_benchmark(fake_release, tmp_path, split="train", n_sequences=5,
                                             seed=3, difficulty=difficulty)  # fmt: skip
    assert bench_path.name == f"train_{difficulty}_5s_03.benchmark"
    assert labels_path.name == f"train_{difficulty}_5s_03.labels"
    benchmark, labels = mp.read_benchmark(bench_path), mp.read_labels(labels_path)
    mp.validate(benchmark, labels)
    letter = difficulty[0]
    ours = structure(benchmark, labels)
    assert ours["images per sequence"] == {("ref", *(f"{letter}{k}" for k in range(1, 6)))}
    # The same structure as the real 5s file of that difficulty.
    real_name = f"train_{difficulty}_5s_00"
    real = structure(mp.read_benchmark(DATA / f"{real_name}.benchmark"),
                     mp.read_labels(DATA / f"{real_name}.labels"))  # fmt: skip
    assert ours == real
    assert len(benchmark.pool) == 30 and len(benchmark.queries) == 500
    # Pool sequences from the split and present; query indices within the sequence's patches.
    sequences = {name.split(".")[0] for name in benchmark.pool}
    assert sequences <= set(fake_release.split_sequences("train"))
    for query in benchmark.queries:
        signature = mp.parse_signature(query)
        assert signature.index < fake_release.counts[signature.sequence]


def test_queries_spread_in_proportion_to_patch_counts(fake_release, tmp_path):
    """Over many seeds, each pool sequence's share of queries matches its share of patches."""
    shares, expected = [], []
    for seed in range(40):
        bench_path, _ = make_benchmark(fake_release, tmp_path, split="train", n_sequences=3,
                                       seed=seed, difficulty="easy",
                                       queries_per_sequence=30)  # fmt: skip
        benchmark = mp.read_benchmark(bench_path)
        pool = list(dict.fromkeys(name.split(".")[0] for name in benchmark.pool))
        counts = Counter(q.split(".")[0] for q in benchmark.queries)
        total = sum(fake_release.counts[s] for s in pool)
        for sequence in pool:
            shares.append(counts[sequence] / len(benchmark.queries))
            expected.append(fake_release.counts[sequence] / total)
    assert np.mean(np.abs(np.array(shares) - np.array(expected))) < 0.04
    assert np.corrcoef(shares, expected)[0, 1] > 0.9


def test_deterministic_for_a_seed_and_different_across_seeds(fake_release, tmp_path):
    def draw(seed: int, out: str) -> tuple[bytes, bytes]:
        paths = make_benchmark(fake_release, tmp_path / out, split="train", n_sequences=4,
                               seed=seed, difficulty="hard")  # fmt: skip
        return paths[0].read_bytes(), paths[1].read_bytes()

    assert draw(1, "a") == draw(1, "b")
    assert draw(1, "a")[0] != draw(2, "c")[0]
    reopened = read_patch_dataset(fake_release.root)  # from the folder path, same task
    paths = make_benchmark(reopened.root, tmp_path / "d", split="train", n_sequences=4, seed=1,
                           difficulty="hard")  # fmt: skip
    assert paths[0].read_bytes() == draw(1, "a")[0]


def test_the_test_split_and_forty_sequence_names(fake_release, tmp_path):
    bench_path, _ = make_benchmark(fake_release, tmp_path, split="test", n_sequences=3, seed=0,
                                   difficulty="easy")  # fmt: skip
    pool = {name.split(".")[0] for name in mp.read_benchmark(bench_path).pool}
    assert pool == set(ECCV2016_SPLITS["test"][:3])
    assert benchmark_name("train", "hard", 40, 1) == "train_hard_40s_01"
    assert benchmark_name("test", "easy", 5, 123) == "test_easy_5s_123"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_sequences": 8}, r"7 train sequences, expected at least 8 \(--sequences\)"),
        ({"split": "val"}, r"split must be one of 'train', 'test'; got 'val'"),
        ({"difficulty": "tough"}, r"difficulty must be one of 'easy', 'hard'; got 'tough'"),
        ({"n_sequences": 0}, r"n_sequences must be an integer >= 1"),
        ({"seed": -1}, r"seed must be an integer >= 0"),
        ({"queries_per_sequence": 10_000}, r"20000 queries \(10000 per sequence\) but"),
    ],
)
def test_bad_requests(fake_release, tmp_path, kwargs, message):
    args = {"split": "train", "n_sequences": 2, "seed": 0, "difficulty": "easy", **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        make_benchmark(fake_release, tmp_path, **args)


def test_missing_difficulty_images_and_unknown_splits(tmp_path):
    for name in ("v_a", "v_b"):
        for image in ("ref", "e1", "e2", "e3", "e4", "e5"):
            patches = np.zeros((3, 65, 65), np.uint8)
            write_patches(tmp_path / "data" / name / f"{image}.png", patches)
    with pytest.raises(InvalidInputError, match=r"0 train sequences.*2 sequences have no split"):
        make_benchmark(tmp_path / "data", tmp_path, split="train", n_sequences=1, seed=0,
                       difficulty="easy")  # fmt: skip
    (tmp_path / "data" / "splits.json").write_text(json.dumps({"train": ["v_a", "v_b"]}))
    with pytest.raises(InvalidInputError, match=r"v_[ab]: no h1\.png; a hard benchmark needs ref"):
        make_benchmark(tmp_path / "data", tmp_path, split="train", n_sequences=1, seed=0,
                       difficulty="hard")  # fmt: skip
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidInputError, match="is a file; expected a folder"):
        make_benchmark(tmp_path / "data", tmp_path / "file", split="train", n_sequences=1,
                       seed=0, difficulty="easy", queries_per_sequence=1)  # fmt: skip


def test_cli_errors_are_messages_not_tracebacks(tmp_path):
    for args, message in [
        (["make-benchmark", "--patches", str(tmp_path / "absent"), "--split", "train",
          "--sequences", "2", "--seed", "0", "--difficulty", "easy", "--out", str(tmp_path)],
         "is not a folder"),
        (["describe", "--patches", str(tmp_path), "--method", "sift", "--out", str(tmp_path)],
         "no sequence folders"),
        (["make-dataset", str(tmp_path / "d"), "--scenes", "nonsense", "--no-progress"],
         "unknown synthetic scene"),
    ]:  # fmt: skip
        result = run_cli("patches", *args)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr
