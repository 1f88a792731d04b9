"""TREC files with any whitespace between fields (metricalc.retrieval.spacing and the fast reader
of metricalc.retrieval.trec_files): read by the CSV reader, never line by line, and read as
trec_eval's whitespace split reads them."""

from __future__ import annotations

import numpy as np
import pytest

from metricalc.errors import InvalidInputError
from metricalc.retrieval import Qrels, Run, evaluate, read_qrels, read_run, spacing, trec_files
from metricalc.retrieval.spacing import single_spaced

SPACES = [b" ", b"  ", b"\t", b" \t ", b"\x0b", b"\x0c", b"   \t"]
"""Separators between fields: runs of C's ``isspace`` bytes other than the line end."""


def obvious_single_spaced(data: bytes) -> bytes:
    """Each line's whitespace-split fields joined by one space (``bytes.split`` splits at the
    bytes of C's ``isspace``)."""
    return b"\n".join(b" ".join(line.split()) for line in data.split(b"\n"))


def messy(rng: np.random.Generator, rows: list[list[bytes]]) -> bytes:
    """``rows`` written with random separators, whitespace around lines, CRLF ends, blank lines
    and lines of whitespace only."""
    lines = []
    for fields in rows:
        line = b"".join(f + SPACES[rng.integers(len(SPACES))] for f in fields[:-1]) + fields[-1]
        if rng.random() < 0.2:
            line = SPACES[rng.integers(len(SPACES))] + line
        if rng.random() < 0.2:
            line += SPACES[rng.integers(len(SPACES))]
        if rng.random() < 0.2:
            line += b"\r"
        lines.append(line)
        if rng.random() < 0.05:
            lines.append(SPACES[rng.integers(len(SPACES))] if rng.random() < 0.5 else b"")
    return b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("block", [7, 64, spacing.BLOCK])
def test_single_spaced_equals_splitting_every_line(monkeypatch, tmp_path, seed, block):
    """Random bytes dense in whitespace, re-spaced in blocks of every size."""
    monkeypatch.setattr(spacing, "BLOCK", block)
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"ab1.\n \t\r\x0b\x0c  \n", dtype=np.uint8)
    data = alphabet[rng.integers(0, alphabet.size, 2000)].tobytes()
    path = tmp_path / "text.txt"
    path.write_bytes(data)
    assert single_spaced(path) == obvious_single_spaced(data)


def no_line_by_line(monkeypatch):
    """Make the line-by-line reader fail, so that a test passes only through the fast reader."""

    def refuse(*args, **kwargs):
        raise AssertionError("read line by line")

    monkeypatch.setattr(trec_files, "_scan", refuse)


def random_judgments(rng: np.random.Generator, n_queries: int = 30):
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        docs = [f"d{d}" for d in rng.choice(300, size=60, replace=False)]
        qrels[f"q{q}"] = {d: int(rng.integers(-1, 3)) for d in docs[:30]}
        run[f"q{q}"] = {d: float(rng.integers(0, 20)) / 4 for d in docs[10:]}
    return qrels, run


@pytest.mark.parametrize("seed", range(4))
def test_messy_files_are_read_fast_and_as_trec_eval_splits_them(monkeypatch, tmp_path, seed):
    rng = np.random.default_rng(seed)
    judged, scored = random_judgments(rng)
    qrels_rows = [[q.encode(), b"1.5", d.encode(), str(r).encode()]
                  for q, docs in judged.items() for d, r in docs.items()]
    run_rows = [[q.encode(), b"Q0", d.encode(), str(i).encode(), repr(s).encode(), b"tag"]
                for q, docs in scored.items() for i, (d, s) in enumerate(docs.items())]
    (tmp_path / "qrels.txt").write_bytes(messy(rng, qrels_rows))
    (tmp_path / "run.txt").write_bytes(messy(rng, run_rows))
    no_line_by_line(monkeypatch)
    qrels, run = read_qrels(tmp_path / "qrels.txt"), read_run(tmp_path / "run.txt")
    expected = evaluate(Qrels.from_dict(judged), Run.from_dict(scored, tag="tag"), ["all_trec"])
    assert evaluate(qrels, run, ["all_trec"]).to_text(per_query=True) == expected.to_text(
        per_query=True
    )


def test_trec_covid_qrels_two_spaces_before_the_docno(monkeypatch, tmp_path):
    """TREC-COVID's qrels format (``qid 1.5  docno rel``)."""
    (tmp_path / "qrels.txt").write_text("1 1.5  08efpohc 0\n1 0.5  0a0a0a0a 2\n2 4  0b1b2b3b 1\n")
    no_line_by_line(monkeypatch)
    qrels = read_qrels(tmp_path / "qrels.txt")
    assert qrels.qids.to_pylist() == [b"1", b"2"]
    assert qrels.docnos.take(qrels.doc.tolist()).to_pylist() == [b"08efpohc", b"0a0a0a0a",
                                                                  b"0b1b2b3b"]
    assert qrels.rel.tolist() == [0, 2, 1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1  d1 1\n", "line 1: expected 4 fields"),  # an empty iter field in the CSV's eyes
        ("q1 0 d1 1\nq1 0\t\td2 1 x\n", "line 2: expected 4 fields"),
        ("q1 0 d1 1\r\nq1 0 d2 x\r\n", "line 2: relevance 'x' is not an integer"),
    ],
)
def test_a_bad_line_among_runs_of_whitespace_is_named(tmp_path, text, message):
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match=message):
        read_qrels(path)


def test_a_run_with_no_judged_document_scores_zero():
    """The join of a run and qrels sharing no document (trec_eval prints 0 for every measure)."""
    result = evaluate(Qrels.from_dict({"q1": {"d1": 1, "d2": 0}}),
                      Run.from_dict({"q1": {"d3": 1.0, "d4": 0.5}}), ["map", "P.5", "bpref"])
    assert result.summary == {"map": 0.0, "bpref": 0.0, "P_5": 0.0}
