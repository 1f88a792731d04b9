"""``metricalc trec-eval QRELS RUN [RUN ...]``: one TREC run evaluated as trec_eval evaluates
it, or several compared (their ``all`` values and paired significance tests against a baseline).

Building the parser must not import :mod:`metricalc.retrieval` (NumPy, pyarrow) or
:mod:`metricalc.stats`, so the tie policies and tests are spelled here;
``tests/retrieval/test_trec_eval.py`` and ``tests/benchmarks/trec/test_trec_compare.py`` check that
they agree with
``metricalc.retrieval.TIE_POLICIES`` and ``metricalc.stats.TESTS``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from metricalc.errors import InvalidInputError

if TYPE_CHECKING:
    from metricalc.retrieval import Qrels, Run, TrecEval
    from metricalc.retrieval.querycube import EvalOptions
    from metricalc.retrieval.zscores import ZScores

TIE_POLICIES = ("trec_eval", "expected", "optimistic", "pessimistic")
"""``metricalc.retrieval.TIE_POLICIES``."""
SCORES = ("float64", "float32")
"""``metricalc.retrieval.order.SCORES``."""
TESTS = ("randomization", "ttest", "wilcoxon", "sign")
"""The tests of ``metricalc.stats.TESTS`` that take any per-query value (not McNemar's; not
``auto``, which would pick McNemar's for 0/1 measures: the default is the test of the mean)."""
REL_FORMATS = ("qrels", "prefs", "qrels_prefs", "qrels_jg")
"""trec_eval's ``-R`` relevance formats (:mod:`metricalc.retrieval.prefs_files`)."""
CORRECTIONS = ("holm", "bonferroni", "fdr_bh", "none")
"""``metricalc.stats.CORRECTIONS``."""


def add_trec_eval(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc trec-eval QRELS RUN [RUN ...] [-m MEASURE ...] [-q] [-c] [-l LEVEL] ...``."""
    te = verbs.add_parser(
        "trec-eval",
        help="evaluate a TREC run against qrels, with trec_eval's measures and output",
        description=(
            "Evaluate a TREC run (qid Q0 docno rank score tag) against TREC qrels (qid 0 docno "
            "rel) with trec_eval 9.0.8's definitions, ordering and output format. With several "
            "runs: a table of their all values, with paired significance tests of every run "
            "against a baseline (Holm-corrected per measure)."
        ),
    )
    te.add_argument("qrels", type=Path, metavar="QRELS", help="TREC qrels file")
    te.add_argument("run_files", type=Path, nargs="+", metavar="RUN",
                    help="TREC run file(s); several: compared (named by file stem)")
    te.add_argument(
        "-m", "--measure", action="append", dest="measures", metavar="MEASURE",
        help="trec_eval measure (map, P.5,10, ndcg_cut.10, official, all_trec, set) or ranx "
        "alias (ndcg@10, precision@5, mrr, ...); repeatable (default: official)",
    )
    te.add_argument("-q", action="store_true", dest="per_query", help="per-query values too")
    te.add_argument("-n", action="store_false", dest="summary",
                    help="no summary: leave out the 'all' lines (trec_eval's -n)")
    te.add_argument("-c", action="store_true", dest="complete",
                    help="average over every qrels query (missing from the run: 0)")
    te.add_argument("-l", type=int, default=1, dest="level", metavar="LEVEL",
                    help="smallest relevant qrels value (default 1)")
    te.add_argument("-M", type=int, dest="depth", metavar="DEPTH",
                    help="evaluate the first DEPTH documents of each query only")
    te.add_argument("-J", action="store_true", dest="judged_only",
                    help="evaluate the judged retrieved documents only (after -M)")
    te.add_argument("-N", type=int, default=0, dest="num_docs", metavar="NUM_DOCS",
                    help="documents in the collection (utility's fourth cell; default 0)")
    te.add_argument("-Z", type=Path, dest="zscores", metavar="ZSCORES_FILE",
                    help="report z-scores, from 'qid measure mean stddev' lines")
    te.add_argument("-D", dest="debug", metavar="LEVEL[.QID]",
                    help="trec_eval's debug option: -D LEVEL.QID evaluates query QID only; "
                    "trec_eval's traces (levels above 0) are not printed")
    te.add_argument("-R", choices=REL_FORMATS, default="qrels", dest="rel_format",
                    help="format of QRELS (default: qrels): qrels, prefs (qid jg jsg docno "
                    "rel_level), qrels_prefs (qrels read as preferences), qrels_jg (qid jg docno "
                    "rel); the last three have their own measures, by default the nicknames "
                    "prefs, prefs and qrels_jg")
    te.add_argument("--tie-policy", "--ties", choices=TIE_POLICIES, default="trec_eval",
                    metavar="POLICY", help="order of tied scores (default: trec_eval, docno "
                    "descending; or expected, optimistic, pessimistic)")
    te.add_argument("--scores", choices=SCORES, default="float64",
                    help="compare run scores as doubles, as trec_eval 9.0.8 does, or as 32-bit "
                    "floats, as pytrec_eval and the older v9.0.8 tag do (default: float64)")
    te.add_argument("--json", action="store_true",
                    help='print {"per_query": {qid: {measure: value}}, "all": {...}}')
    te.add_argument("--cube", type=Path, metavar="FILE",
                    help="also write the runs' per-query measures as a QueryCube (.nc) for "
                    "metricalc compare / report")
    several = te.add_argument_group("several runs")
    several.add_argument("--baseline", metavar="RUN",
                         help="run every other run is tested against (default: the first)")
    several.add_argument("--test", choices=TESTS, default="randomization",
                         help="paired test per measure (default: randomization, on the mean "
                         "difference)")
    several.add_argument("--correction", choices=CORRECTIONS, default="holm",
                         help="over the comparisons of one measure (default: holm)")
    several.add_argument("--alpha", type=float, default=0.05)
    several.add_argument("--seed", type=int, default=0, help="seed of the sign flips")
    several.add_argument("--n-resamples", type=int, default=10_000,
                         help="sign flips / bootstrap resamples")
    several.add_argument("--latex", type=Path, metavar="FILE", help="write the table as LaTeX")
    te.set_defaults(run=_trec_eval)


def _trec_eval(args: argparse.Namespace) -> int:
    # NumPy asks Linux for transparent huge pages for arrays of 4 MB and more; where the kernel
    # then compacts memory at a page fault (its "madvise" defrag, a common default), a run of
    # a million lines spent up to half its time there. NumPy reads this when it loads, which
    # the command has not done yet; one set by the user stays.
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    from metricalc.allocator import keep_freed_memory

    keep_freed_memory(heap_only=True)  # arrays of 32 MB and more, freed and allocated again
    if args.rel_format != "qrels":
        return _other_format(args)
    query = _debug_query(args.debug)
    several = len(args.run_files) > 1
    for flag, value in ((("-Z", args.zscores), ("-D", args.debug)) if several else
                        (("--baseline", args.baseline), ("--latex", args.latex))):
        if value is not None:
            raise InvalidInputError(f"{flag} evaluates one run; give one run file" if several
                                    else f"{flag} compares several runs; give two run files "
                                    "or more")
    if not several and query is None and args.cube is None:
        from metricalc.retrieval.small_join import evaluate_files

        return _print(args, evaluate_files(args.qrels, args.run_files[0],
                                           args.measures or ["official"], **_options(args),
                                           zscores=_zscores(args)))
    from metricalc.retrieval import read_qrels, read_run

    qrels = read_qrels(args.qrels)
    if several:
        return _compare_runs(args, qrels, {name: read_run(path) for name, path in
                                           _run_names(args.run_files).items()})
    run = read_run(args.run_files[0])
    return _one_run(args, qrels, run if query is None else _only_query(run, query))


def _debug_query(debug: str | None) -> str | None:
    """The query of trec_eval's ``-D level.qid`` (None: every query); a level above 0 asks
    for trec_eval's debugging traces, which metricalc does not print (a note on stderr says so;
    the values are printed as without them)."""
    if debug is None:
        return None
    level, dot, query = debug.partition(".")
    try:
        number = int(level)
    except ValueError:
        raise InvalidInputError(f"-D {debug!r}: expected LEVEL or LEVEL.QID, LEVEL an integer "
                                "like 0") from None
    if number > 0:
        print(f"metricalc: note: -D {debug}: trec_eval's debugging traces (level {number}) are "
              "not printed; the values are", file=sys.stderr)
    return query if dot else None


def _only_query(run: Run, query: str) -> Run:
    """The lines of ``run`` for ``query`` (trec_eval's ``-D 0.qid``)."""
    from dataclasses import replace

    qids = run.qids.to_pylist()
    code = qids.index(query.encode()) if query.encode() in qids else -1
    keep = run.qid == code
    return replace(run, qid=run.qid[keep], doc=run.doc[keep], score=run.score[keep])


def _options(args: argparse.Namespace) -> EvalOptions:
    """The evaluation options of ``evaluate`` given on the command line."""
    return {"complete": args.complete, "level": args.level, "depth": args.depth,
            "tie_policy": args.tie_policy, "scores": args.scores, "judged_only": args.judged_only,
            "num_docs": args.num_docs}


def _zscores(args: argparse.Namespace) -> ZScores | None:
    """The z-scores of ``-Z``, if given."""
    from metricalc.retrieval.zscores import read_zscores

    return None if args.zscores is None else read_zscores(args.zscores)


def _one_run(args: argparse.Namespace, qrels: Qrels, run: Run) -> int:
    from metricalc.retrieval import evaluate

    result = evaluate(qrels, run, args.measures or ["official"], **_options(args),
                      zscores=_zscores(args))
    if args.cube is not None:
        from metricalc import cube as qc
        from metricalc.retrieval.querycube import retrieval_cube

        cube = retrieval_cube(qrels, {Path(args.run_files[0]).stem: run},
                              args.measures or ["official"], **_options(args))
        _output(args.cube, lambda: qc.save(cube, args.cube))
    return _print(args, result)


def _print(args: argparse.Namespace, result: TrecEval) -> int:
    """The values of one run, as trec_eval prints them (or ``--json``)."""
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(result.to_text(per_query=args.per_query, summary=args.summary), end="")
    return 0


def _output(path: Path, write: Callable[[], object]) -> None:
    """``write()`` to ``path``; an operating system error (a folder, no permission, a full disk)
    as a one-line :class:`~metricalc.errors.InvalidInputError` naming the file."""
    try:
        write()
    except OSError as error:
        raise InvalidInputError(f"cannot write {path}: {error.strerror or error}") from None


def _run_names(paths: list[Path]) -> dict[str, Path]:
    """Run names: the file stems, or the paths as given where two stems are equal."""
    if len({str(p) for p in paths}) != len(paths):
        raise InvalidInputError(f"a run file is given twice: {', '.join(map(str, paths))}")
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return dict(zip(stems, paths, strict=True))
    return {str(p): p for p in paths}


def _compare_runs(args: argparse.Namespace, qrels: Qrels, runs: dict[str, Run]) -> int:
    from metricalc.benchmarks.trec.comparison import compare_runs
    from metricalc.fileio import atomic_write

    if args.per_query and not args.json:
        raise InvalidInputError(
            "-q with several runs adds the per-query values to --json; give --json too"
        )
    result = compare_runs(
        qrels, runs, args.measures or ["official"], **_options(args),
        baseline=args.baseline, test=args.test, correction=args.correction, alpha=args.alpha,
        seed=args.seed, n_resamples=args.n_resamples,
    )
    if args.cube is not None:
        from metricalc import cube as qc

        _output(args.cube, lambda: qc.save(result.cube, args.cube))
    if args.latex is not None:
        _output(args.latex, lambda: atomic_write(args.latex, result.table().to_latex()))
    if args.json:
        print(json.dumps(result.to_json(per_query=args.per_query), indent=1))
    else:
        result.print()
    return 0


def _other_format(args: argparse.Namespace) -> int:
    """One run against preferences or qrels with judgment groups (``-R``)."""
    from metricalc.retrieval import prefs_files as pf
    from metricalc.retrieval import read_run

    given = [flag for flag, on in (("several runs", len(args.run_files) > 1),
                                   ("--cube", args.cube is not None),
                                   ("--baseline", args.baseline is not None),
                                   ("--latex", args.latex is not None),
                                   ("--tie-policy", args.tie_policy != "trec_eval"),
                                   ("-J", args.judged_only), ("-N", args.num_docs != 0),
                                   ("-Z", args.zscores is not None),
                                   ("-D", args.debug is not None)) if on]
    if given:
        raise InvalidInputError(f"-R {args.rel_format} evaluates one run with trec_eval's "
                                f"order; {', '.join(given)} need -R qrels")
    run = read_run(args.run_files[0])
    if args.rel_format == "qrels_jg":
        from metricalc.retrieval.judgment_groups import evaluate_qrels_jg

        result = evaluate_qrels_jg(pf.read_qrels_jg(args.qrels), run,
                                   args.measures or ["qrels_jg"], complete=args.complete,
                                   level=args.level, depth=args.depth)
    else:
        from metricalc.retrieval.prefs_measures import evaluate_prefs

        read = pf.read_prefs if args.rel_format == "prefs" else pf.read_qrels_prefs
        result = evaluate_prefs(read(args.qrels), run, args.measures or ["prefs"],
                                complete=args.complete, depth=args.depth)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(result.to_text(per_query=args.per_query), end="")
    return 0
