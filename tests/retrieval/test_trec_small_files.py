"""Small TREC files read with NumPy alone (metricalc.retrieval.small_files): the same values as
the files read by pyarrow's CSV reader (metricalc.retrieval.trec_files), an independent reader,
and as pytrec_eval; anything not plain is left to that reader, with its values and messages."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from metricalc.errors import InvalidInputError
from metricalc.retrieval import evaluate, evaluate_files, read_qrels, read_run, small_join
from metricalc.retrieval import small_files as sf

MEASURES = ["all_trec", "success.1,5,10"]
OPTIONS = [
    {},
    {"complete": True, "level": 2},
    {"depth": 5, "judged_only": True},
    {"tie_policy": "optimistic"},
    {"tie_policy": "expected"},
    {"scores": "float32"},
]


def write_collection(folder, seed, *, sep=" ", end="\n", long_ids=False):
    """Qrels and run files with graded and negative judgments, unjudged and unpooled documents,
    ties (also at float32 precision only), queries on one side only, ids of every length."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in rng.permutation(40):
        qid = f"{'topic-' * long_ids}{q}" if q % 7 else f"é{q}"
        n = int(rng.integers(1, 30))
        docs = [f"{'clueweb09-en' * int(long_ids and j % 3 == 0)}d{j}"
                for j in rng.choice(100, n, replace=False)]
        if q % 5:
            for d in [*docs[: int(rng.integers(1, n + 1))], "judged-only"]:
                qrels.append(f"{qid}{sep}0{sep}{d}{sep}{int(rng.integers(-1, 4))}")
        if q % 6:
            scores = rng.integers(0, 6, n) + np.where(rng.random(n) < 0.2, 1e-9, 0.0)
            scores = np.where(rng.random(n) < 0.2, -scores / 7, scores)
            for rank, (d, s) in enumerate(zip(docs, scores, strict=True), start=1):
                text = repr(float(s)) if rank % 4 else f"{s:.4f}"
                run.append(f"{qid}{sep}Q0{sep}{d}{sep}{rank}{sep}{text}{sep}tag{seed}")
    (folder / "qrels").write_text(end.join(qrels) + end)
    (folder / "run").write_text(end.join(run) + end)
    return folder / "qrels", folder / "run"


def by_pyarrow(qrels, run, measures=MEASURES, **options):
    return evaluate(read_qrels(qrels), read_run(run), measures, **options)


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("seed", [0, 1])
def test_plain_files_give_the_values_read_by_pyarrow(tmp_path, seed, options):
    qrels, run = write_collection(tmp_path, seed, long_ids=seed == 1)
    assert small_join.join_files(qrels, run) is not None  # read with NumPy
    measures = ["map", "P.5", "recip_rank"] if options.get("tie_policy") == "expected" else MEASURES
    ours = evaluate_files(qrels, run, measures, **options)
    theirs = by_pyarrow(qrels, run, measures, **options)
    assert ours.to_text(per_query=True) == theirs.to_text(per_query=True)
    assert ours.to_json() == theirs.to_json()


@pytest.mark.parametrize(("sep", "end"), [("\t", "\n"), ("  ", "\r\n"), (" \t ", "\n\n")])
def test_any_whitespace_between_fields(tmp_path, sep, end):
    qrels, run = write_collection(tmp_path, 2, sep=sep, end=end)
    assert small_join.join_files(qrels, run) is not None
    expected = by_pyarrow(qrels, run).to_text(per_query=True)
    assert evaluate_files(qrels, run, MEASURES).to_text(per_query=True) == expected


def test_the_values_of_pytrec_eval(tmp_path):
    qrels, run = write_collection(tmp_path, 3)
    with qrels.open() as q, run.open() as r:
        judged, ranked = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
    measures = {"map", "P", "ndcg_cut", "recip_rank", "Rprec", "bpref", "infAP"}
    ref = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(ranked)
    ours = evaluate_files(qrels, run, sorted(measures), scores="float32")
    for name in ("map", "P_5", "ndcg_cut_10", "recip_rank", "Rprec", "bpref", "infAP"):
        theirs = [ref[q][name] for q in ours.queries]
        np.testing.assert_allclose(ours.per_query[name], theirs, rtol=0, atol=1e-12)


def test_a_blank_line_and_no_line_end_at_the_end(tmp_path):
    (tmp_path / "q").write_text("\n  \nq1 0 d1 1\n\nq1 0 d2 0")
    (tmp_path / "r").write_text("q1 Q0 d2 1 2 a\n \t\nq1 Q0 d1 2 1 b")
    joined = small_join.join_files(tmp_path / "q", tmp_path / "r")
    assert joined is not None and joined.tag == "b"
    assert evaluate_files(tmp_path / "q", tmp_path / "r", ["map"]).summary == {"map": 0.5}


NOT_PLAIN = {
    "seven fields": ("q1 0 d1 1\n", "q1 Q0 d1 1 2.0 tag extra\n"),
    "five fields": ("q1 0 d1 1\n", "q1 Q0 d1 1 2.0\n"),
    "two lines joined": ("q1 0 d1 1\n", "q1 Q0 d1 1 2.0 tag q1 Q0 d2 2 1.0 tag\n"),
    "a line split": ("q1 0 d1 1\n", "q1 Q0 d1\n1 2.0 tag\n"),
    "three fields in qrels": ("q1 d1 1\n", "q1 Q0 d1 1 2.0 tag\n"),
    "NaN score": ("q1 0 d1 1\n", "q1 Q0 d1 1 nan tag\n"),
    "text score": ("q1 0 d1 1\n", "q1 Q0 d1 1 high tag\n"),
    "decimal relevance": ("q1 0 d1 1.5\n", "q1 Q0 d1 1 2.0 tag\n"),
    "document twice in the run": ("q1 0 d1 1\n", "q1 Q0 d1 1 2.0 tag\nq1 Q0 d1 2 1.0 tag\n"),
    "document twice in qrels": ("q1 0 d1 1\nq1 0 d1 0\n", "q1 Q0 d1 1 2.0 tag\n"),
    "empty run": ("q1 0 d1 1\n", " \n"),
    "NUL byte": ("q1 0 d1 1\n", "q1 Q0 d1\x00 1 2.0 tag\n"),
    "byte order mark": ("\ufeffq1 0 d1 1\n", "q1 Q0 d1 1 2.0 tag\n"),
}


@pytest.mark.parametrize("case", NOT_PLAIN)
def test_files_not_plain_are_read_by_pyarrow_with_its_values_and_messages(tmp_path, case):
    text_qrels, text_run = NOT_PLAIN[case]
    (tmp_path / "q").write_text(text_qrels)
    (tmp_path / "r").write_text(text_run)
    assert small_join.join_files(tmp_path / "q", tmp_path / "r") is None
    try:
        expected = by_pyarrow(tmp_path / "q", tmp_path / "r").to_text(per_query=True)
    except InvalidInputError as error:
        with pytest.raises(InvalidInputError) as raised:
            evaluate_files(tmp_path / "q", tmp_path / "r", MEASURES)
        assert str(raised.value) == str(error)
    else:
        assert evaluate_files(tmp_path / "q", tmp_path / "r", MEASURES).to_text(
            per_query=True) == expected


def test_a_missing_file_is_named(tmp_path):
    (tmp_path / "q").write_text("q1 0 d1 1\n")
    assert small_join.join_files(tmp_path / "q", tmp_path / "none") is None
    with pytest.raises(InvalidInputError, match="none: no such file"):
        evaluate_files(tmp_path / "q", tmp_path / "none")


def test_large_files_are_read_by_pyarrow(tmp_path, monkeypatch):
    qrels, run = write_collection(tmp_path, 4)
    calls = []
    monkeypatch.setattr(small_join, "SMALL", 100)
    monkeypatch.setattr(small_join, "join_files", lambda *args: calls.append(args))
    expected = by_pyarrow(qrels, run).to_text()
    assert evaluate_files(qrels, run, MEASURES).to_text() == expected
    assert calls == []


def fields(texts):
    """The bytes of a file with the fields ``texts`` (one space between them), and where each
    starts and ends, as small_files finds them."""
    starts = np.cumsum([1] + [len(t) + 1 for t in texts[:-1]])
    text = b"\0" + b" ".join(texts) + b"\0" * sf.LONGEST
    return np.frombuffer(text, dtype=np.uint8), starts, starts + [len(t) for t in texts]


NUMBERS = st.one_of(
    st.from_regex(r"\A-?[0-9]{0,18}(\.[0-9]{0,18})?\Z").filter(bool),
    st.from_regex(r"\A[-+]?[0-9]{1,3}(\.[0-9]{0,4})?([eE][-+]?[0-9]{1,3})?\Z"),
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(["inf", "-Infinity", "1_0", ".", "-", "1.2.3", "--1", "1-", "0x10"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(NUMBERS, min_size=1, max_size=20))
def test_decimals_are_read_as_python_float_reads_them(texts):
    try:
        expected = np.array([float(t) for t in texts])
    except ValueError:
        with pytest.raises(ValueError):
            sf._decimals(*fields([t.encode() for t in texts]))
        return
    found = sf._decimals(*fields([t.encode() for t in texts]))
    assert found.view(np.uint64).tolist() == expected.view(np.uint64).tolist()  # -0.0 too


def test_decimals_by_hand():
    found = sf._decimals(*fields([b"0.1", b"-0.000", b"123456789012345", b"1e-3", b"5.",
                                  b"9" * 400, b"0." + b"0" * 400 + b"1"]))
    assert found.tolist() == [0.1, -0.0, 123456789012345.0, 0.001, 5.0, math.inf, 0.0]
    assert math.copysign(1, found[1]) == -1


def test_identifiers_in_byte_order_of_any_length():
    ids = [b"b", b"10", b"2", "é".encode(), b"b", b"abcdefgh", b"abcdefg"]
    names, codes = sf._encode(sf._keys(*fields(ids)))
    assert names.tolist() == [b"10", b"2", b"abcdefg", b"abcdefgh", b"b", "é".encode()]
    assert codes.tolist() == [4, 0, 1, 5, 4, 3, 2]
    longer = sf._keys(*fields([b"abcdefghi", b"b"]))  # over 8 bytes: as bytes
    names, codes = sf._encode(sf._joined(sf._keys(*fields(ids)), longer))
    assert names.tolist() == [b"10", b"2", b"abcdefg", b"abcdefgh", b"abcdefghi", b"b",
                              "é".encode()]
    assert codes.tolist() == [5, 0, 1, 6, 5, 3, 2, 4, 5]
    names, codes = sf._encode(sf._keys(*fields([b"q2", b"q2", b"q2", b"q10", b"q10", b"q2"])))
    assert names.tolist() == [b"q10", b"q2"] and codes.tolist() == [1, 1, 1, 0, 0, 1]


def test_a_small_run_from_the_shell_loads_no_pyarrow(tmp_path):
    qrels, run = write_collection(tmp_path, 5)
    probe = (
        "import sys\nfrom metricalc.cli import main\n"
        f"main(['trec-eval', {str(qrels)!r}, {str(run)!r}, '-m', 'all_trec', '-q'])\n"
        "print('pyarrow' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False"


@pytest.mark.parametrize("sep", [" ", "  "])
def test_read_qrels_with_numpy_gives_the_judgments_read_by_pyarrow(tmp_path, monkeypatch, sep):
    from metricalc.retrieval import trec_files

    qrels, _ = write_collection(tmp_path, 6, sep=sep, long_ids=True)

    def judgments(read):
        return sorted(zip(read.qids.take(read.qid.tolist()).to_pylist(),
                          read.docnos.take(read.doc.tolist()).to_pylist(), read.rel.tolist(),
                          strict=True))

    ours = read_qrels(qrels)
    assert sf.judgments(qrels) is not None and ours.qids.to_pylist() == sorted(
        ours.qids.to_pylist())
    monkeypatch.setattr(trec_files, "SMALL", 0)  # pyarrow's CSV reader
    assert judgments(ours) == judgments(read_qrels(qrels))
