"""HPatches patch retrieval files: signatures, readers, writer and every validation rule
(docs/protocols.md, protocol 6), on hand-built files and on the real ECCV 2016 benchmark files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import metricalc.benchmarks.hpatches_patches as mp
from metricalc.errors import InvalidInputError
from tests.data_files import HPATCHES_RETRIEVAL

DATA = HPATCHES_RETRIEVAL
REAL_BENCHMARKS = sorted(DATA.glob("*.benchmark"))

POOL = ("a.ref", "a.e1", "a.e2", "b.ref", "b.e1")
QUERIES = ("a.ref.0", "b.ref.1")
CLUSTERS = (("a.ref.0", "a.e1.0", "a.e2.0"), ("b.ref.1", "b.e1.1"))


def ranked(query: str, *head: str) -> list[str]:
    """51 results: the query, ``head``, then distinct filler patches of image ``b.e1``/``a.e1``."""
    filler_image = "b.e1" if query.startswith("a.") else "a.e1"
    filler = [f"{filler_image}.{100 + k}" for k in range(50 - len(head))]
    return [query, *head, *filler]


RESULTS = (ranked("a.ref.0", "a.e1.0"), ranked("b.ref.1"))


def write(path: Path, lines: list[str] | str) -> Path:
    text = lines if isinstance(lines, str) else "\n".join(lines) + "\n"
    path.write_text(text)
    return path


@pytest.fixture
def task(tmp_path: Path) -> dict[str, Path]:
    """A valid benchmark, labels and results written to ``tmp_path``."""
    return {
        "benchmark": write(tmp_path / "t.benchmark", [",".join(POOL), *QUERIES]),
        "labels": write(tmp_path / "t.labels", [",".join(POOL), *map(",".join, CLUSTERS)]),
        "results": mp.write_results(tmp_path / "t.results", POOL, RESULTS),
    }


def check(task: dict[str, Path]) -> None:
    mp.validate(
        mp.read_benchmark(task["benchmark"]),
        mp.read_labels(task["labels"]),
        mp.read_results(task["results"]),
    )


def raises_at(path: Path | str, line: int, expected: str):
    """``pytest.raises`` for an InvalidInputError starting ``<path>, line <line>:`` and saying
    what was expected."""
    return pytest.raises(
        InvalidInputError,
        match=rf"^{re.escape(str(path))}, line {line}: .*{expected}",
    )


# -- signatures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("i_chestnuts.ref.631", ("i_chestnuts", "ref", 631)),
        ("v_bricks.e5.0", ("v_bricks", "e5", 0)),
        ("v_x-y.h3.12", ("v_x-y", "h3", 12)),
        ("s.t1.7", ("s", "t1", 7)),
    ],
)
def test_parse_signature(text: str, parts: tuple) -> None:
    signature = mp.parse_signature(text)
    assert signature == parts
    assert str(signature) == text
    assert signature.patch_image == text.rpartition(".")[0] == mp.patch_image(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a.ref",
        "a.ref.1.2",
        ".ref.1",
        "a.e6.1",
        "a.e0.1",
        "a.REF.1",
        "a.ref.-1",
        "a.ref.x",
        "a.ref.",
        "a b.ref.1",
        "a.ref.1 ",
    ],
)
def test_parse_signature_refuses_malformed(text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"expected a signature 'seq\.img\.idx'"):
        mp.parse_signature(text)


def test_parse_patch_image() -> None:
    assert mp.parse_patch_image("i_dome.h5") == ("i_dome", "h5")
    for bad in ("i_dome", "i_dome.ref.1", "i_dome.x1", 3):
        with pytest.raises(InvalidInputError, match="patch-image"):
            mp.parse_patch_image(bad)  # type: ignore[arg-type]
    assert len(mp.IMAGES) == 16 and mp.N_RESULTS == 51


# -- readers and writer -------------------------------------------------------------------------


def test_read_the_three_files(task: dict[str, Path]) -> None:
    benchmark = mp.read_benchmark(task["benchmark"])
    labels = mp.read_labels(task["labels"])
    results = mp.read_results(task["results"])
    assert benchmark == mp.Benchmark(POOL, QUERIES, task["benchmark"])
    assert benchmark.name == "t"
    assert labels == mp.Labels(POOL, CLUSTERS, task["labels"])
    assert results.pool == POOL
    assert results.results == tuple(map(tuple, RESULTS))
    assert results.queries == QUERIES
    check(task)


def test_readers_tolerate_crlf_spaces_and_missing_final_newline(tmp_path: Path) -> None:
    path = write(tmp_path / "x.benchmark", "a.ref , a.e1\r\n a.ref.0\r\na.e1.4")
    benchmark = mp.read_benchmark(path)
    assert benchmark.pool == ("a.ref", "a.e1")
    assert benchmark.queries == ("a.ref.0", "a.e1.4")


def test_readers_skip_a_utf8_byte_order_mark(tmp_path: Path) -> None:
    """Editors on Windows start UTF-8 files with a byte order mark; it is not part of the first
    patch-image's name."""
    path = tmp_path / "x.benchmark"
    path.write_bytes(b"\xef\xbb\xbfa.ref,a.e1\na.ref.0\n")
    assert mp.read_benchmark(path).pool == ("a.ref", "a.e1")


def test_write_results_is_atomic_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "r.results"
    assert mp.write_results(path, POOL, RESULTS) == path
    assert path.read_text().splitlines()[0] == ",".join(POOL)
    assert mp.read_results(path).results == tuple(map(tuple, RESULTS))
    before = path.read_text()
    with pytest.raises(InvalidInputError, match=r"results argument, line 3: name 2"):
        mp.write_results(path, POOL, [RESULTS[0], ["b.ref.1", "b.ref"]])
    assert path.read_text() == before  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.results"]  # no temporary left
    with pytest.raises(InvalidInputError, match=r"pool argument, line 1: pool entry 2"):
        mp.write_results(tmp_path / "s.results", ["a.ref", "a.ref.1"], RESULTS)
    with pytest.raises(InvalidInputError, match="expected a sequence of patch-image names"):
        mp.write_results(tmp_path / "s.results", "a.ref", RESULTS)
    with pytest.raises(InvalidInputError, match=r"results\[0\]: expected at least one"):
        mp.write_results(tmp_path / "s.results", POOL, [[]])
    assert not (tmp_path / "s.results").exists()


# -- parse errors name the file and the line ----------------------------------------------------


@pytest.mark.parametrize("reader", [mp.read_benchmark, mp.read_labels, mp.read_results])
def test_empty_file(tmp_path: Path, reader) -> None:
    path = write(tmp_path / "empty.txt", "")
    with raises_at(path, 1, "empty file; expected the pool"):
        reader(path)


@pytest.mark.parametrize("reader", [mp.read_benchmark, mp.read_labels, mp.read_results])
def test_empty_line(tmp_path: Path, reader) -> None:
    path = write(tmp_path / "gap.txt", ["a.ref,b.ref", "a.ref.0", "  ", "b.ref.1"])
    with raises_at(path, 3, "empty line"):
        reader(path)
    path = write(tmp_path / "tail.txt", "a.ref\na.ref.0\n\n")
    with raises_at(path, 3, "empty line"):
        reader(path)


def test_malformed_names_in_each_file(tmp_path: Path) -> None:
    path = write(tmp_path / "x.benchmark", ["a.ref,a.e9", "a.ref.0"])
    with raises_at(path, 1, r"pool entry 2: expected a patch-image .*'a.e9'"):
        mp.read_benchmark(path)
    path = write(tmp_path / "x.benchmark", ["a.ref", "a.ref.0", "a.ref.1x"])
    with raises_at(path, 3, r"name 1: expected a signature 'seq.img.idx'.*'a.ref.1x'"):
        mp.read_benchmark(path)
    path = write(tmp_path / "x.labels", ["a.ref", "a.ref.0,a.e1.0", "a.ref.1,a.e1"])
    with raises_at(path, 3, r"name 2: expected a signature.*'a.e1'"):
        mp.read_labels(path)
    path = write(tmp_path / "x.results", ["a.ref", "a.ref.0,a.ref.2,,a.ref.3"])
    with raises_at(path, 2, "empty name at position 3"):
        mp.read_results(path)


@pytest.mark.parametrize("reader", [mp.read_benchmark, mp.read_labels, mp.read_results])
def test_patch_indices_beyond_64_bits(tmp_path: Path, reader) -> None:
    """2**63 - 1 is the largest index (a signed 64-bit integer); 2**63 and 2**64 are refused,
    naming the file, the line and the index."""
    largest = 2**63 - 1
    path = write(tmp_path / "x.txt", ["a.ref,a.e1", f"a.ref.{largest}"])
    assert reader(path).pool == ("a.ref", "a.e1")  # read without a word
    assert mp.parse_signature(f"a.ref.{largest}").index == largest
    for index in (2**63, 2**64, 10**30):
        path = write(tmp_path / "x.txt", ["a.ref,a.e1", "a.ref.0", f"a.ref.{index}"])
        with raises_at(path, 3, rf"name 1: .*patch index {index} does not fit in 64 bits"):
            reader(path)


def test_benchmark_lines_hold_one_query(tmp_path: Path) -> None:
    path = write(tmp_path / "x.benchmark", ["a.ref", "a.ref.0", "a.ref.1,a.ref.2"])
    with raises_at(path, 3, "expected one query signature, got 2 names"):
        mp.read_benchmark(path)
    path = write(tmp_path / "y.benchmark", ["a.ref"])
    with raises_at(path, 2, "expected at least one query"):
        mp.read_benchmark(path)


# -- every validation rule -----------------------------------------------------------------------


def test_rule_labels_header_equal(task: dict[str, Path]) -> None:
    write(task["labels"], ["a.ref,a.e1,a.e2,b.ref,b.e2", *map(",".join, CLUSTERS)])
    with raises_at(task["labels"], 1, "expected the pool of .*t.benchmark line 1.*entry 5"):
        check(task)


def test_rule_results_header_equal(task: dict[str, Path]) -> None:
    mp.write_results(task["results"], POOL[:-1], RESULTS)
    with raises_at(
        task["results"], 1, "headers must be equal.*4 entries where the benchmark has 5"
    ):
        check(task)


@pytest.mark.parametrize(("kept", "line"), [(1, 3), (3, 4)])
def test_rule_labels_same_number_of_lines(task: dict[str, Path], kept: int, line: int) -> None:
    clusters = [*CLUSTERS, CLUSTERS[0]][:kept]
    write(task["labels"], [",".join(POOL), *map(",".join, clusters)])
    with raises_at(task["labels"], line, f"expected 3 lines .*got {kept + 1} lines"):
        check(task)


@pytest.mark.parametrize(("kept", "line"), [(1, 3), (3, 4)])
def test_rule_results_same_number_of_lines(task: dict[str, Path], kept: int, line: int) -> None:
    mp.write_results(task["results"], POOL, [*RESULTS, RESULTS[0]][:kept])
    with raises_at(task["results"], line, f"expected 3 lines .*got {kept + 1} lines"):
        check(task)


def test_rule_query_in_its_cluster(task: dict[str, Path]) -> None:
    write(task["labels"], [",".join(POOL), ",".join(CLUSTERS[0]), "b.e1.1,b.ref.2"])
    with raises_at(task["labels"], 3, r"expected the cluster of query 'b.ref.1' .*line 3"):
        check(task)


def test_rule_first_result_is_the_query(task: dict[str, Path]) -> None:
    swapped = [RESULTS[0], ["b.e1.1", "b.ref.1", *RESULTS[1][2:]]]
    mp.write_results(task["results"], POOL, swapped)
    with raises_at(task["results"], 3, "expected the query 'b.ref.1' .* first result"):
        check(task)


@pytest.mark.parametrize("count", [50, 52, 1])
def test_rule_exactly_51_results(task: dict[str, Path], count: int) -> None:
    row = [*RESULTS[1], "b.e1.999"][:count]
    mp.write_results(task["results"], POOL, [RESULTS[0], row])
    with raises_at(task["results"], 3, f"expected exactly 51 results .*got {count}$"):
        check(task)


def test_rule_result_images_in_the_pool(task: dict[str, Path]) -> None:
    row = list(RESULTS[0])
    row[7] = "c.ref.3"
    mp.write_results(task["results"], POOL, [row, RESULTS[1]])
    with raises_at(task["results"], 2, r"expected results from the pool, got 'c.ref.3' at rank 8"):
        check(task)


def test_rule_query_images_in_the_pool(task: dict[str, Path]) -> None:
    write(task["benchmark"], [",".join(POOL), "a.ref.0", "b.e2.1"])
    with raises_at(task["benchmark"], 3, r"expected a query from the pool, got 'b.e2.1'"):
        check(task)


def test_rule_cluster_images_in_the_pool(task: dict[str, Path]) -> None:
    write(task["labels"], [",".join(POOL), "a.ref.0,a.e3.0", ",".join(CLUSTERS[1])])
    with raises_at(task["labels"], 2, r"expected cluster members from the pool, got 'a.e3.0'"):
        check(task)


def test_repeated_signatures_are_valid(task: dict[str, Path]) -> None:
    mp.write_results(task["results"], POOL, [ranked("a.ref.0", "a.e1.0", "a.e1.0"), RESULTS[1]])
    check(task)


def test_objects_built_in_memory_are_checked_too() -> None:
    benchmark = mp.Benchmark(POOL, QUERIES)
    labels = mp.Labels(POOL, CLUSTERS)
    mp.validate(benchmark, labels, mp.Results(POOL, tuple(map(tuple, RESULTS))))
    bad = mp.Results(POOL, (tuple(RESULTS[0]), ("b.ref.1", "b.ref.01x")))
    with raises_at("<results>", 3, r"name 2: expected a signature"):
        mp.validate(benchmark, labels, bad)
    with raises_at("<results>", 3, "expected 51 signatures, got none"):
        mp.validate(benchmark, labels, mp.Results(POOL, (tuple(RESULTS[0]), ())))
    with raises_at("<benchmark>", 2, "expected at least one query"):
        mp.validate(mp.Benchmark(POOL, ()))
    with raises_at("<benchmark>", 1, "expected a non-empty pool"):
        mp.validate(mp.Benchmark((), QUERIES))
    with pytest.raises(InvalidInputError, match="labels: expected a Labels"):
        mp.validate(benchmark, CLUSTERS)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="benchmark: expected a Benchmark"):
        mp.validate(POOL)  # type: ignore[arg-type]


def test_benchmark_without_labels_validates_results(task: dict[str, Path]) -> None:
    benchmark = mp.read_benchmark(task["benchmark"])
    mp.validate(benchmark, None, mp.read_results(task["results"]))
    mp.write_results(task["results"], POOL, [RESULTS[0], RESULTS[0]])
    with raises_at(task["results"], 3, "expected the query 'b.ref.1'"):
        mp.validate(benchmark, None, mp.read_results(task["results"]))


# -- the real ECCV 2016 files --------------------------------------------------------------------


def test_real_data_folder_is_complete() -> None:
    names = {p.stem for p in REAL_BENCHMARKS}
    assert len(names) == 23
    assert {p.stem for p in DATA.glob("*.labels")} == {n for n in names if n.startswith("train")}


@pytest.mark.parametrize("path", REAL_BENCHMARKS, ids=lambda p: p.stem)
def test_real_files_parse_and_validate(path: Path) -> None:
    benchmark = mp.read_benchmark(path)
    n_sequences = 40 if "_40s_" in path.name else 5
    assert len(benchmark.pool) == 6 * n_sequences
    assert len(benchmark.queries) == (50 if path.stem == "train_example" else 100 * n_sequences)
    labels_path = path.with_suffix(".labels")
    if not labels_path.exists():  # the test_* benchmarks come without labels
        assert path.name.startswith("test_")
        mp.validate(benchmark)
        return
    labels = mp.read_labels(labels_path)
    mp.validate(benchmark, labels)
    assert {len(cluster) for cluster in labels.clusters} == {6}
    assert all(c[0] == q for q, c in zip(benchmark.queries, labels.clusters, strict=True))
