"""``metricalc trec-eval QRELS RUN`` (a TREC run evaluated as trec_eval evaluates it).

Building the parser must not import :mod:`metricalc.retrieval` (pyarrow and pandas), so the tie
policies are spelled here; ``tests/test_trec_eval.py`` checks that they agree with
``metricalc.retrieval.TIES``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

TIES = ("trec_eval", "expected", "optimistic", "pessimistic")
"""``metricalc.retrieval.TIES``."""


def add_trec_eval(verbs: argparse._SubParsersAction) -> None:
    """``metricalc trec-eval QRELS RUN [-m MEASURE ...] [-q] [-c] [-l LEVEL] [-M DEPTH] ...``."""
    te = verbs.add_parser(
        "trec-eval",
        help="evaluate a TREC run against qrels, with trec_eval's measures and output",
        description=(
            "Evaluate a TREC run (qid Q0 docno rank score tag) against TREC qrels (qid 0 docno "
            "rel) with trec_eval 9.0.8's definitions, ordering and output format."
        ),
    )
    te.add_argument("qrels", type=Path, metavar="QRELS", help="TREC qrels file")
    te.add_argument("run_file", type=Path, metavar="RUN", help="TREC run file")
    te.add_argument(
        "-m", "--measure", action="append", dest="measures", metavar="MEASURE",
        help="trec_eval measure (map, P.5,10, ndcg_cut.10, official, all_trec, set) or ranx "
        "alias (ndcg@10, precision@5, mrr, ...); repeatable (default: official)",
    )
    te.add_argument("-q", action="store_true", dest="per_query", help="per-query values too")
    te.add_argument("-c", action="store_true", dest="complete",
                    help="average over every qrels query (missing from the run: 0)")
    te.add_argument("-l", type=int, default=1, dest="level", metavar="LEVEL",
                    help="smallest relevant qrels value (default 1)")
    te.add_argument("-M", type=int, dest="depth", metavar="DEPTH",
                    help="evaluate the first DEPTH documents of each query only")
    te.add_argument("--ties", choices=TIES, default="trec_eval",
                    help="order of tied scores (default trec_eval: docno descending)")
    te.add_argument("--json", action="store_true",
                    help='print {"per_query": {qid: {measure: value}}, "all": {...}}')
    te.set_defaults(run=_trec_eval)


def _trec_eval(args: argparse.Namespace) -> int:
    from metricalc.retrieval import evaluate, read_qrels, read_run

    qrels = read_qrels(args.qrels)
    run = read_run(args.run_file)
    result = evaluate(
        qrels,
        run,
        args.measures or ["official"],
        complete=args.complete,
        level=args.level,
        depth=args.depth,
        ties=args.ties,
    )
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(result.to_text(per_query=args.per_query), end="")
    return 0
