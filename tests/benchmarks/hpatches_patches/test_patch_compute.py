"""HPatches retrieval ``.results``: descriptor pools, top 51 against brute force, files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricalc.benchmarks.hpatches_patches import compute
from metricalc.benchmarks.hpatches_patches.compute import (
    DescriptorPool,
    compute_results,
    load_descriptor_pool,
    rank_benchmark,
)
from metricalc.benchmarks.hpatches_patches.files import read_results, write_ranked_results
from metricalc.errors import InvalidInputError
from tests.data_files import HPATCHES_RETRIEVAL

DATA = HPATCHES_RETRIEVAL
EXAMPLE = DATA / "train_example.benchmark"
K = compute.N_NEIGHBOURS

# Small pool: 3 sequences x 2 images, uneven patch counts across sequences (M = 314); the images
# of one sequence hold the same patches, so the same count.
NAMES = ["s0.ref", "s0.e1", "s1.ref", "s1.h2", "s2.ref", "s2.t5"]
COUNTS = [40, 40, 60, 60, 57, 57]

# Tiny blocks, groups and batches: query chunks of 7, blocks of 25 columns (fewer than 51: rows
# stay without a limit over two blocks, then some have one and some not), batches split.
TINY = {
    "CHUNK_ELEMENTS": 175,
    "QUERY_CHUNK": 7,
    "MIN_BLOCK_COLUMNS": 1,
    "GROUPS": 64,
    "COMPARE_ELEMENTS": 150,
    "CANDIDATE_ELEMENTS": 40,
    "L1_BLOCK_COLUMNS": 16,
    "L1_BLOCK_QUERIES": 3,
}


def dyadic(rng: np.random.Generator, shape: tuple[int, int], levels: int = 16) -> np.ndarray:
    """Random float32 descriptors on a 1/4 grid: float32 L2 and L1 are exact, ties are frequent."""
    return (rng.integers(-levels // 2, levels // 2, shape) / 4).astype(np.float32)


def save_pool(root: Path, arrays: dict[str, np.ndarray], layout: str) -> None:
    for name, array in arrays.items():
        sequence, image = name.split(".")
        (root / sequence).mkdir(parents=True, exist_ok=True)
        if layout == "npy":
            np.save(root / sequence / f"{image}.npy", array)
        else:
            np.savetxt(root / sequence / f"{image}.csv", array, delimiter=",", fmt="%.6g")


def write_benchmark(path: Path, header: list[str], queries: list[str]) -> Path:
    path.write_text("\n".join([",".join(header), *queries]) + "\n")
    return path


def brute_force(pool: DescriptorPool, queries: list[str], distance: str) -> list[list[str]]:
    """Full distance matrix in float64; stable argsort, so ties go to the lower pool row."""
    descriptors = pool.descriptors.astype(np.float64)
    rows = np.array([pool.row(q) for q in queries])
    diff = descriptors[rows][:, None, :] - descriptors[None, :, :]
    full = (diff**2).sum(axis=2) if distance == "l2" else np.abs(diff).sum(axis=2)
    full[np.arange(len(rows)), rows] = np.inf
    order = np.argsort(full, axis=1, kind="stable")[:, :K]
    return [[q, *pool.signatures(order[i])] for i, q in enumerate(queries)]


def random_queries(rng: np.random.Generator, names: list[str], counts: list[int], n: int) -> list:
    images = rng.integers(0, len(names), n)
    return [f"{names[i]}.{rng.integers(0, counts[i])}" for i in images]


@pytest.fixture
def small_pool(tmp_path: Path):
    rng = np.random.default_rng(1)
    arrays = {name: dyadic(rng, (count, 8)) for name, count in zip(NAMES, COUNTS, strict=True)}
    queries = random_queries(rng, NAMES, COUNTS, 30)
    return arrays, queries, write_benchmark(tmp_path / "small.benchmark", NAMES, queries)


# -- results against brute force --------------------------------------------------------------


@pytest.mark.parametrize("layout", ["npy", "csv"])
@pytest.mark.parametrize("distance", ["l2", "l1"])
def test_results_equal_brute_force(tmp_path, small_pool, layout, distance):
    arrays, queries, benchmark = small_pool
    save_pool(tmp_path / "desc", arrays, layout)
    pool = load_descriptor_pool(tmp_path / "desc", NAMES)
    assert pool.descriptors.dtype == np.float32 and pool.descriptors.shape == (sum(COUNTS), 8)
    assert pool.offsets.tolist() == [0, *np.cumsum(COUNTS).tolist()]
    np.testing.assert_array_equal(pool.descriptors[40:80], arrays["s0.e1"])
    results = compute_results(benchmark, pool, distance=distance)
    assert results == brute_force(pool, queries, distance)


@pytest.mark.parametrize("distance", ["l2", "l1"])
def test_small_blocks_groups_and_batches(small_pool, monkeypatch, distance):
    arrays, queries, benchmark = small_pool
    pool = DescriptorPool.from_arrays(NAMES, list(arrays.values()))
    expected = brute_force(pool, queries, distance)
    for name, value in TINY.items():
        monkeypatch.setattr(compute, name, value)
    assert compute_results(benchmark, pool, distance=distance, progress=True) == expected


@pytest.mark.parametrize("tiny", [False, True])
def test_all_distances_tied_lower_rows_first(tmp_path, monkeypatch, tiny):
    if tiny:
        for name, value in TINY.items():
            monkeypatch.setattr(compute, name, value)
    pool = DescriptorPool.from_arrays(["a.ref", "a.e1"], [np.ones((30, 4)), np.ones((40, 4))])
    queries = ["a.e1.5", "a.ref.0", "a.ref.29"]
    results = compute_results(
        write_benchmark(tmp_path / "t.benchmark", list(pool.names), queries), pool
    )
    for query, line in zip(queries, results, strict=True):
        others = [r for r in range(K + 1) if r != pool.row(query)][:K]
        assert line == [query, *pool.signatures(np.array(others))]


def test_few_distinct_values_tie_break(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    arrays = [rng.integers(0, 2, (n, 3)).astype(np.float32) for n in (70, 90)]  # 8 descriptors
    pool = DescriptorPool.from_arrays(["b.ref", "b.e2"], arrays)
    queries = random_queries(rng, ["b.ref", "b.e2"], [70, 90], 12)
    benchmark = write_benchmark(tmp_path / "b.benchmark", list(pool.names), queries)
    expected = {d: brute_force(pool, queries, d) for d in ("l2", "l1")}
    assert {d: compute_results(benchmark, pool, distance=d) for d in expected} == expected
    for name, value in TINY.items():
        monkeypatch.setattr(compute, name, value)
    assert {d: compute_results(benchmark, pool, distance=d) for d in expected} == expected


def test_line_shape_query_first_and_verbatim(tmp_path):
    rng = np.random.default_rng(2)
    pool = DescriptorPool.from_arrays(["c.ref"], [dyadic(rng, (80, 6))])
    queries = ["c.ref.07", "c.ref.79", "c.ref.7"]
    results = compute_results(write_benchmark(tmp_path / "c.benchmark", ["c.ref"], queries), pool)
    for query, line in zip(queries, results, strict=True):
        assert len(line) == K + 1 and line[0] == query
        assert len(set(line[1:])) == K and pool.signature(pool.row(query)) not in line[1:]
    assert results[0][1:] == results[2][1:]  # "c.ref.07" is patch 7


def test_real_valued_descriptors_within_rounding(tmp_path):
    """Continuous data: float32 GEMM rounding may swap near-ties only, never the distances."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((n, 32)).astype(np.float32) for n in (300, 250)]
    pool = DescriptorPool.from_arrays(["d.ref", "d.e3"], arrays)
    queries = random_queries(rng, ["d.ref", "d.e3"], [300, 250], 20)
    benchmark = write_benchmark(tmp_path / "d.benchmark", list(pool.names), queries)
    descriptors = pool.descriptors.astype(np.float64)
    for line in compute_results(benchmark, pool):
        row = pool.row(line[0])
        exact = np.sqrt(((descriptors - descriptors[row]) ** 2).sum(axis=1))
        ours = exact[[pool.row(s) for s in line[1:]]]
        exact[row] = np.inf
        np.testing.assert_allclose(ours, np.sort(exact)[:K], rtol=1e-5)


def test_real_example_benchmark(tmp_path):
    """train_example.benchmark (30 patch-images, 50 queries) on a synthetic pool of 36,234.

    Every image of a sequence gets as many patches as the sequence's highest query index + 1.
    """
    lines = EXAMPLE.read_text().splitlines()
    header, queries = lines[0].split(","), lines[1:]
    highest: dict[str, int] = {}
    for query in queries:
        sequence, _, index = query.split(".")
        highest[sequence] = max(highest.get(sequence, 0), int(index))
    rng = np.random.default_rng(4)
    arrays = {name: dyadic(rng, (highest[name.split(".")[0]] + 1, 8), levels=64) for name in header}
    save_pool(tmp_path / "desc", arrays, "npy")
    pool = load_descriptor_pool(tmp_path / "desc", header)
    assert pool.n_patches == sum(len(a) for a in arrays.values()) == 36_234
    results = compute_results(EXAMPLE, pool)
    assert len(results) == len(queries) == 50
    assert [line[0] for line in results] == queries
    assert all(len(line) == K + 1 for line in results)
    assert results == brute_force_by_query(pool, queries)
    path = write_ranked_results(tmp_path / "train_example.results", header, results)
    written = path.read_text().splitlines()
    assert written[0] == lines[0] and len(written) == 51
    assert [line.split(",") for line in written[1:]] == results


def brute_force_by_query(pool: DescriptorPool, queries: list[str]) -> list[list[str]]:
    """L2 brute force one query at a time (a full 50 x 36,234 x 8 difference is large)."""
    descriptors = pool.descriptors.astype(np.float64)
    out = []
    for query in queries:
        row = pool.row(query)
        full = ((descriptors - descriptors[row]) ** 2).sum(axis=1)
        full[row] = np.inf
        out.append([query, *pool.signatures(np.argsort(full, kind="stable")[:K])])
    return out


# -- the pool ---------------------------------------------------------------------------------


def test_pool_rows_and_signatures():
    pool = DescriptorPool.from_arrays(["e.ref", "e.e1"], [np.zeros((3, 2)), np.ones((2, 2))])
    assert [pool.row(s) for s in ("e.ref.0", "e.ref.2", "e.e1.0", "e.e1.1")] == [0, 2, 3, 4]
    assert pool.signatures(np.arange(5)) == ["e.ref.0", "e.ref.1", "e.ref.2", "e.e1.0", "e.e1.1"]
    assert pool.counts.tolist() == [3, 2] and pool.n_patches == 5


def test_pool_checks_its_parts():
    with pytest.raises(InvalidInputError, match="C-contiguous float32 matrix"):
        DescriptorPool(("p.ref",), np.zeros((3, 2)), np.array([0, 3]))
    with pytest.raises(InvalidInputError, match="offsets: expected 2 non-decreasing integers"):
        DescriptorPool(("p.ref",), np.zeros((3, 2), np.float32), np.array([0, 2]))
    with pytest.raises(InvalidInputError, match=r"expected one array per patch-image \(2\)"):
        DescriptorPool.from_arrays(["p.ref", "p.e1"], [np.zeros((3, 2))])
    with pytest.raises(InvalidInputError, match="at least one patch-image"):
        DescriptorPool.from_arrays([], [])


def test_npy_preferred_over_csv(tmp_path):
    (tmp_path / "f").mkdir()
    np.save(tmp_path / "f" / "ref.npy", np.full((2, 3), 7.0))
    (tmp_path / "f" / "ref.csv").write_text("1,2,3\n")
    assert load_descriptor_pool(tmp_path, ["f.ref"]).descriptors.tolist() == [[7.0] * 3] * 2


def test_missing_patch_image(tmp_path):
    save_pool(tmp_path, {"g.ref": np.zeros((3, 2))}, "csv")
    with pytest.raises(InvalidInputError, match=r"'g\.e4' \(pool entry 2\).*e4\.npy.*e4\.csv"):
        load_descriptor_pool(tmp_path, ["g.ref", "g.e4"])


@pytest.mark.parametrize("layout", ["npy", "csv"])
def test_a_patch_image_with_a_missing_row_is_refused(tmp_path, layout):
    """Row i of every image of a sequence is patch i: a file with a row too few or too many
    would shift every later patch, so its count must equal its sequence's first image's."""
    rng = np.random.default_rng(3)
    arrays = {"m.ref": dyadic(rng, (60, 4)), "m.e1": dyadic(rng, (60, 4)),
              "m.e2": dyadic(rng, (59, 4)), "n.ref": dyadic(rng, (30, 4))}  # fmt: skip
    save_pool(tmp_path, arrays, layout)
    with pytest.raises(
        InvalidInputError, match=rf"e2\.{layout}: 59 rows \(patches\), but .*ref\.{layout} has 60"
    ):
        load_descriptor_pool(tmp_path, ["m.ref", "m.e1", "m.e2", "n.ref"])
    # other sequences may hold other counts
    pool = load_descriptor_pool(tmp_path, ["m.ref", "m.e1", "n.ref"])
    assert pool.counts.tolist() == [60, 60, 30]


def test_inconsistent_dimensions(tmp_path):
    save_pool(tmp_path, {"h.ref": np.zeros((3, 4)), "h.e1": np.zeros((3, 5))}, "npy")
    with pytest.raises(InvalidInputError, match=r"e1\.npy: 5 values per patch.*ref\.npy has 4"):
        load_descriptor_pool(tmp_path, ["h.ref", "h.e1"])
    save_pool(tmp_path, {"h.ref": np.zeros((3, 4)), "h.e2": np.zeros((3, 3))}, "csv")
    (tmp_path / "h" / "ref.npy").unlink()
    with pytest.raises(InvalidInputError, match=r"e2\.csv: 3 values per patch"):
        load_descriptor_pool(tmp_path, ["h.ref", "h.e2"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,2,3\n4,5\n", r"ref\.csv, row 2: expected 3 finite"),
        ("1,2,3\n4,x,6\n", r"ref\.csv: expected one row of comma-separated floats"),
        ("1,2,3\n4,5,6,7\n", r"ref\.csv: expected one row of comma-separated floats"),
        ("", r"ref\.csv: empty file"),
        ("1,nan,3\n", r"ref\.csv, row 1: expected 3 finite"),
        ("1,2,3\n\n4,5,6\n", r"ref\.csv, row 2: expected 3 finite"),
        ("1,2,1e39\n", r"ref\.csv, row 1: expected 3 finite"),
    ],
)
def test_malformed_csv(tmp_path, text, message):
    (tmp_path / "i").mkdir()
    (tmp_path / "i" / "ref.csv").write_text(text)
    with pytest.raises(InvalidInputError, match=message):
        load_descriptor_pool(tmp_path, ["i.ref"])


def test_malformed_npy_and_pool_names(tmp_path):
    (tmp_path / "j").mkdir()
    np.save(tmp_path / "j" / "ref.npy", np.zeros(5))
    with pytest.raises(InvalidInputError, match=r"ref\.npy: expected an N x D matrix"):
        load_descriptor_pool(tmp_path, ["j.ref"])
    with pytest.raises(InvalidInputError, match=r"entry 2: patch-image 'j\.ref' repeats entry 1"):
        load_descriptor_pool(tmp_path, ["j.ref", "j.ref"])
    for bad in ["j", "j.x9", "../j.ref", "j.ref.1"]:
        with pytest.raises(InvalidInputError, match=r"expected a patch-image 'seq\.img'"):
            load_descriptor_pool(tmp_path, [bad])
    with pytest.raises(InvalidInputError, match="not a folder"):
        load_descriptor_pool(tmp_path / "nowhere", ["j.ref"])
    (tmp_path / "j" / "ref.npy").write_bytes(b"not numpy")
    with pytest.raises(InvalidInputError, match=r"ref\.npy: expected a NumPy \.npy file"):
        load_descriptor_pool(tmp_path, ["j.ref"])
    with open(tmp_path / "j" / "ref.npy", "wb") as handle:
        np.savez(handle, a=np.zeros((2, 2)))
    with pytest.raises(InvalidInputError, match=r"ref\.npy: expected a \.npy array"):
        load_descriptor_pool(tmp_path, ["j.ref"])
    np.save(tmp_path / "j" / "ref.npy", np.zeros((3, 0)))
    with pytest.raises(InvalidInputError, match="at least one value per patch"):
        load_descriptor_pool(tmp_path, ["j.ref"])


# -- benchmark and query errors ---------------------------------------------------------------


@pytest.fixture
def pool60() -> DescriptorPool:
    rng = np.random.default_rng(6)
    return DescriptorPool.from_arrays(
        ["k.ref", "k.e1"], [dyadic(rng, (20, 4)), dyadic(rng, (40, 4))]
    )


def test_signature_index_out_of_range(tmp_path, pool60):
    benchmark = write_benchmark(tmp_path / "k.benchmark", ["k.ref", "k.e1"], ["k.e1.3", "k.ref.20"])
    with pytest.raises(
        InvalidInputError,
        match=r"k\.benchmark, line 3: signature 'k\.ref\.20': patch index 20 is out of range; "
        r"patch-image 'k\.ref' has 20 patches",
    ):
        compute_results(benchmark, pool60)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["k.ref,k.e2", "k.ref.1"], r"line 1: pool entry 2 is 'k\.e2' but the descriptor pool"),
        (["k.ref", "k.ref.1"], r"line 1: the header lists 1 patch-images but the descriptor pool"),
        (["k.ref,k.e1", "k.e3.1"], r"line 2: signature 'k\.e3\.1': patch-image 'k\.e3' is not in"),
        (["k.ref,k.e1", "k.ref.1", "k.ref"], r"line 3: name 1: expected a signature 'seq\.img"),
        (["k.ref,k.e1", "k.ref.-1"], r"line 2: name 1: expected a signature.*not a non-negative"),
        (["k.ref,k.e1", "k.ref.1", "", "k.ref.2"], r"line 3: empty line"),
        (["k.ref,k.e1", "k.ref.1,k.ref.2"], r"line 2: expected one query signature, got 2 names"),
        (["k.ref,k.e1"], r"line 2: expected at least one query signature after the pool"),
        ([], r"line 1: empty file; expected the pool of patch-images"),
        (["k.ref,k/x.e1", "k.ref.1"], r"line 1: pool entry 2: expected a patch-image.*invalid seq"),
    ],
)
def test_malformed_benchmark(tmp_path, pool60, lines, message):
    path = tmp_path / "bad.benchmark"
    path.write_text("".join(f"{line}\n" for line in lines))
    with pytest.raises(InvalidInputError, match=message):
        compute_results(path, pool60)


def test_pool_too_small_and_bad_arguments(tmp_path, pool60):
    small = DescriptorPool.from_arrays(["m.ref"], [np.zeros((51, 2))])
    benchmark = write_benchmark(tmp_path / "m.benchmark", ["m.ref"], ["m.ref.0"])
    assert len(compute_results(benchmark, small)[0]) == K + 1
    smaller = DescriptorPool.from_arrays(["m.ref"], [np.zeros((50, 2))])
    with pytest.raises(InvalidInputError, match="pool: 50 patches; expected at least 51"):
        compute_results(benchmark, smaller)
    with pytest.raises(InvalidInputError, match="distance: expected one of"):
        compute_results(benchmark, small, distance="cosine")
    with pytest.raises(InvalidInputError, match=r"absent\.benchmark: cannot read the file"):
        compute_results(tmp_path / "absent.benchmark", small)
    (tmp_path / "latin.benchmark").write_bytes(b"m.ref\n\xff\n")
    with pytest.raises(InvalidInputError, match="expected UTF-8 text"):
        compute_results(tmp_path / "latin.benchmark", small)
    with pytest.raises(InvalidInputError, match="pool: expected a DescriptorPool"):
        compute_results(benchmark, small.descriptors)
    with pytest.raises(InvalidInputError, match=r"rows: expected pool rows in 0\.\.50"):
        small.signatures(np.array([51]))
    with pytest.raises(InvalidInputError, match="signature: expected a str"):
        small.row(7)
    huge = DescriptorPool.from_arrays(["m.ref"], [np.full((60, 2), 3e38)])
    for distance in ("l2", "l1"):
        with pytest.raises(InvalidInputError, match=f"overflows? float32 {distance.upper()}"):
            compute_results(benchmark, huge, distance=distance)


# -- writing ----------------------------------------------------------------------------------


def test_write_results_round_trip_and_errors(tmp_path):
    line = [f"n.ref.{i}" for i in range(K + 1)]
    path = write_ranked_results(tmp_path / "n.results", ["n.ref", "n.e1"], [line, line[::-1]])
    assert path.read_text() == f"n.ref,n.e1\n{','.join(line)}\n{','.join(line[::-1])}\n"
    target = tmp_path / "o.results"
    with pytest.raises(InvalidInputError, match=r"results\[1\] \(line 3\): expected 51 signatures"):
        write_ranked_results(target, ["n.ref"], [line, line[:K]])
    with pytest.raises(InvalidInputError, match=r"results argument, line 2: name 1: expected"):
        write_ranked_results(target, ["n.ref"], [["n.ref", *line[1:]]])
    with pytest.raises(InvalidInputError, match="pool: expected a sequence"):
        write_ranked_results(target, "n.ref", [line])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.results"]  # nothing half-written


def test_rank_benchmark_writes_the_brute_force_ranking(tmp_path):
    """The rank step of the pipeline: descriptor folder + benchmark -> the .results file."""
    rng = np.random.default_rng(3)
    names = ["r.ref", "r.e1"]
    for name in names:
        sequence, image = name.split(".")
        (tmp_path / "d" / sequence).mkdir(parents=True, exist_ok=True)
        np.save(tmp_path / "d" / sequence / f"{image}.npy", rng.normal(size=(40, 8)))
    queries = ["r.ref.0", "r.e1.7"]
    bench = write_benchmark(tmp_path / "r.benchmark", names, queries)
    lines = rank_benchmark(bench, tmp_path / "d", tmp_path / "r.results", distance="l1")
    assert lines == brute_force(load_descriptor_pool(tmp_path / "d", names), queries, "l1")
    written = read_results(tmp_path / "r.results")
    assert written.pool == tuple(names) and written.results == tuple(map(tuple, lines))
