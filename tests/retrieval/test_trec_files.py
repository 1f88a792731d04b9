"""TREC qrels and run files (metricalc.retrieval.trec_files): reading, writing, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from metricalc.errors import InvalidInputError
from metricalc.retrieval import Qrels, Run, evaluate, read_qrels, read_run, write_qrels, write_run
from tests.shared_checks import reading_error


def as_dict(run: Run) -> dict[tuple[str, str], float]:
    qids = [q.decode() for q in run.qids.to_pylist()]
    docs = [d.decode() for d in run.docnos.to_pylist()]
    return {(qids[q], docs[d]): s for q, d, s in zip(run.qid, run.doc, run.score, strict=True)}


def test_read_run_fields_tag_and_byte_ordered_qids(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("b Q0 d1 1 2.5 first\na Q0 d2 1 -1e3 second\nb Q0 d3 2 0 last\n")
    run = read_run(path)
    assert run.tag == "last"
    assert run.qids.to_pylist() == [b"a", b"b"]
    assert as_dict(run) == {("b", "d1"): 2.5, ("a", "d2"): -1000.0, ("b", "d3"): 0.0}


@pytest.mark.parametrize(
    "text",
    [
        "q\tQ0\td1\t1\t2.5\tt\nq\tQ0\td2\t2\t1.5\tt\n",  # tabs
        "q  Q0   d1 1 2.5 t\n  q Q0 d2 2 1.5 t  \n",  # several spaces (line-by-line reader)
        "q Q0 d1 1 2.5 t extra fields\n\nq Q0 d2 2 1.5 t\n",  # extra fields ignored, blank line
    ],
)
def test_read_run_whitespace_variants(tmp_path, text):
    path = tmp_path / "run.txt"
    path.write_text(text)
    assert as_dict(read_run(path)) == {("q", "d1"): 2.5, ("q", "d2"): 1.5}


@pytest.mark.parametrize("block", [1, 2, 3, 5, 8, 1 << 22])
@pytest.mark.parametrize("line", ["q  d3 3 0.5 t\n", " q d3 3 0.5 t\n", "q d3 3 0.5 t \n"])
def test_an_empty_field_anywhere_is_seen_whatever_the_block_of_the_scan(tmp_path, monkeypatch,
                                                                         block, line):
    """Five fields and a separator more (two in a row, one at a line start or end): read as
    six by a CSV reader (an empty Q0 or tag, columns not kept), a line too short for trec_eval,
    which splits at runs of whitespace; the scan for such pairs reads the file in blocks."""
    from metricalc.retrieval import trec_files

    monkeypatch.setattr(trec_files, "SCAN_BLOCK", block)
    path = tmp_path / "run.txt"
    path.write_text("q Q0 d1 1 2.5 t\nq Q0 d2 2 1.5 t\n" + line)
    with pytest.raises(InvalidInputError, match="line 3: expected 6 fields"):
        read_run(path)


def test_a_tab_inside_a_space_separated_line_splits_fields_as_trec_eval(tmp_path):
    """isspace splits 'd1<tab>x': docno d1, rank x, score 1 (a CSV reader would keep 'd1<tab>x'
    as one docno and read the score 2.5)."""
    path = tmp_path / "run.txt"
    path.write_text("q Q0 d1\tx 1 2.5 t\nq Q0 d2 2 1.5 t\n")
    assert as_dict(read_run(path)) == {("q", "d1"): 1.0, ("q", "d2"): 1.5}


def test_read_qrels(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 2\nq1 0 d2 -1\nq2 Q0 d1 0\n")
    qrels = read_qrels(path)
    assert qrels.rel.tolist() == [2, -1, 0]
    assert qrels.qids.to_pylist() == [b"q1", b"q2"]


def test_identifiers_are_bytes_in_strcmp_order(tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes("é Q0 d 1 1 t\nz Q0 d 1 1 t\nZ Q0 d 1 1 t\n".encode())
    assert read_run(path).qids.to_pylist() == [b"Z", b"z", "é".encode()]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q Q0 d1 1 2.5 t\nq Q0 d2 2 1.5\n", "line 2: expected 6 fields 'qid Q0 docno rank "
         "score tag'; found 5"),
        ("q Q0 d1 1 2.5 t\n\nq Q0 d2 2 high t\n", "line 3: score 'high' is not a number"),
        ("q Q0 d1 1 nan t\n", "line 1: score 'nan' is not a number"),
        ("q Q0 d1 1 2.5 t\nr Q0 d1 1 2.5 t\nq Q0 d1 2 1.5 t\n",
         "line 3: document 'd1' is retrieved twice for query 'q'"),
        ("\n  \n", ": the file is empty; expected 'qid Q0 docno rank score tag' lines"),
    ],
)
def test_bad_run_files(tmp_path, text, message):
    path = tmp_path / "run.txt"
    error = reading_error(path, text, read_run)
    separator = "" if message.startswith(":") else " "
    assert error == f"{path}{separator}{message}"
    assert "\n" not in error


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q 0 d1 1\nq 0 d2\n", "line 2: expected 4 fields 'qid iter docno rel'; found 3"),
        ("q 0 d1 1 extra\n", "line 1: expected 4 fields 'qid iter docno rel'; found 5"),
        ("q 0 d1 1\nq 0 d2 yes\n", "line 2: relevance 'yes' is not an integer"),
        ("q 0 d1 1\nq 0 d2 1.5\n", "line 2: relevance '1.5' is not an integer"),
        ("q 0 d1 1\nq 0 d1 0\n", "line 2: document 'd1' is judged twice for query 'q'"),
    ],
)
def test_bad_qrels_files(tmp_path, text, message):
    path = tmp_path / "qrels.txt"
    assert reading_error(path, text, read_qrels) == f"{path} {message}"


def test_empty_and_missing_files(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("")
    with pytest.raises(InvalidInputError) as error:
        read_qrels(path)
    assert str(error.value) == f"{path}: the file is empty; expected 'qid iter docno rel' lines"
    with pytest.raises(InvalidInputError, match="no such file"):
        read_run(tmp_path / "missing.txt")


def test_from_dict_checks_values():
    with pytest.raises(InvalidInputError, match=r"expected an integer relevance; got 0\.5"):
        Qrels.from_dict({"q": {"d": 0.5}})
    with pytest.raises(InvalidInputError, match="expected a numeric score; got 'x'"):
        Run.from_dict({"q": {"d": "x"}})


def test_write_and_read_back(tmp_path):
    rng = np.random.default_rng(0)
    scores = {f"q{q}": {f"d{d}": float(rng.integers(0, 3) + rng.random() * (q % 2))
                        for d in range(30)} for q in range(12)}
    run = Run.from_dict(scores, tag="mine")
    qrels = Qrels.from_dict({q: {f"d{d}": int(rng.integers(-1, 3)) for d in range(0, 30, 3)}
                             for q in scores})
    run_path = write_run(tmp_path / "out" / "run.txt", run)
    qrels_path = write_qrels(tmp_path / "out" / "qrels.txt", qrels)
    back = read_run(run_path)
    assert back.tag == "mine"
    assert as_dict(back) == as_dict(run)  # scores written in full precision
    lines = run_path.read_text().splitlines()
    assert lines[0].split()[1::2] == ["Q0", "1", "mine"]
    assert sorted(p.name for p in run_path.parent.iterdir()) == ["qrels.txt", "run.txt"]
    again = read_qrels(qrels_path)
    assert evaluate(again, back, ["all_trec"]).summary == evaluate(qrels, run,
                                                                  ["all_trec"]).summary


def test_written_ranks_follow_trec_eval_order(tmp_path):
    run = Run.from_dict({"q": {"a": 1.0, "b": 1.0 + 1e-9, "c": 2.0}})
    lines = write_run(tmp_path / "run.txt", run).read_text().splitlines()
    assert [line.split()[2:4] for line in lines] == [["c", "1"], ["b", "2"], ["a", "3"]]


@pytest.mark.parametrize("seed", range(3))
def test_encode_chunked_and_grouped_columns(seed):
    """Codes and distinct values of ``encode`` (one or several chunks, hashed whole or block by
    block) against a dictionary built line by line."""
    import pyarrow as pa

    from metricalc.retrieval.trec_files import encode

    rng = np.random.default_rng(seed)
    for _ in range(100):
        drawn = rng.integers(0, 5, int(rng.integers(0, 40)))
        values = [b"q%d" % v for v in (np.sort(drawn) if rng.random() < 0.5 else drawn)]
        cut = int(rng.integers(0, len(values) + 1))
        column = pa.chunked_array([values[:cut], values[cut:]], pa.binary())
        first_seen = list(dict.fromkeys(values))
        for sort in (True, False):
            for grouped in (True, False):
                codes, uniques = encode(column, sort=sort, grouped=grouped)
                assert uniques.to_pylist() == (sorted(first_seen) if sort else first_seen)
                assert [uniques[int(c)].as_py() for c in codes] == values
