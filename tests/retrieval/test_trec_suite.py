"""trec_eval 9.0.8's own test suite (the ``quicktest`` target of its Makefile) run through
``metricalc trec-eval``: every command line's output must equal trec_eval's expected output,
byte for byte and value by value. The input files and expected outputs are trec_eval's
(tests/data/trec_eval-suite, tests/data/README.md names the commit)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from cli_helpers import run_cli

SUITE = Path(__file__).parents[1] / "data" / "trec_eval-suite"

QUICKTEST = (
    ("test/qrels.test test/results.test", "out.test"),
    ("-m all_trec test/qrels.test test/results.test", "out.test.a"),
    ("-m all_trec -q test/qrels.test test/results.test", "out.test.aq"),
    ("-m all_trec -q -c test/qrels.test test/results.trunc", "out.test.aqc"),
    ("-m all_trec -q -c -M100 test/qrels.test test/results.trunc", "out.test.aqcM"),
    ("-m all_trec -mrelstring.20 -q -l2 test/qrels.rel_level test/results.test",
     "out.test.aql"),
    ("-m all_prefs -q -R prefs test/prefs.test test/prefs.results.test", "out.test.prefs"),
    ("-m all_prefs -q -R qrels_prefs test/qrels.test test/results.test",
     "out.test.qrels_prefs"),
    ("-m qrels_jg -q -R qrels_jg  test/qrels.123 test/results.test", "out.test.qrels_jg"),
    ("-q -miprec_at_recall..10,.20,.25,.75,.50 -m P.5,7,3 -m recall.20,2000 "
     "-m Rprec_mult.5.0,0.2,0.35 -mutility.2,-1,0,0 -m 11pt_avg..25,.5,.75 "
     "-mndcg.1=3,2=9,4=4.5 -mndcg_cut.10,20,23.4 -msuccess.2,5,20 test/qrels.test "
     "test/results.test", "out.test.meas_params"),
    ("-q -m all_trec -Z test/zscores_file test/qrels.test test/results.test", "out.test.aqZ"),
)
"""The eleven ``./trec_eval ARGS | diff - test/EXPECTED`` lines of trec_eval 9.0.8's
``make quicktest``, as (ARGS, EXPECTED)."""

PREFS_LINES = tuple(args for args, _ in QUICKTEST if "-R " in args)
"""The command lines that read the preference formats (``-R prefs``, ``qrels_prefs``,
``qrels_jg``)."""


def argv(args: str) -> list[str]:
    """``metricalc trec-eval`` arguments for a quicktest line, its files in tests/data."""
    return ["trec-eval", *(str(SUITE / w.removeprefix("test/")) if w.startswith("test/") else w
                           for w in shlex.split(args))]


def parse(text: str) -> list[tuple[str, str, str]]:
    """(measure, query, value as printed) per output line."""
    rows = []
    for line in text.splitlines():
        name, qid, value = line.split("\t")
        rows.append((name.strip(), qid, value.strip()))
    return rows


def same_value(ours: str, theirs: str) -> bool:
    """Equal as printed: a number to the printed precision, a string (runid, relstring) as is."""
    try:
        a, b = float(ours), float(theirs)
    except ValueError:
        return ours == theirs
    decimals = len(theirs.partition(".")[2])
    return (a != a and b != b) or round(a, decimals) == round(b, decimals)


@pytest.mark.parametrize(("args", "expected"), QUICKTEST, ids=[e for _, e in QUICKTEST])
def test_quicktest_line(args, expected):
    result = run_cli(*argv(args))
    assert result.returncode == 0, result.stderr
    want = (SUITE / expected).read_text()
    ours, theirs = parse(result.stdout), parse(want)
    assert [r[:2] for r in ours] == [r[:2] for r in theirs]
    differ = [(o, t) for o, t in zip(ours, theirs, strict=True) if not same_value(o[2], t[2])]
    assert not differ, differ[:5]
    assert result.stdout == want


def test_suite_is_the_makefile_quicktest():
    """Eleven command lines, three of them the preference formats'; every file they name is
    in tests/data/trec_eval-suite."""
    assert len(QUICKTEST) == 11
    assert len(PREFS_LINES) == 3
    for args, expected in QUICKTEST:
        assert (SUITE / expected).is_file()
        for word in argv(args)[1:]:
            assert not word.startswith("test/")
            if "/" in word:
                assert Path(word).is_file(), word

