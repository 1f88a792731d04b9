"""``metricalc trec-export cube | patches``: metricalc's results written as TREC run and qrels
files, so that trec_eval, pytrec_eval or ranx compute the same numbers.

Building the parser must not import :mod:`metricalc.retrieval` (pyarrow and pandas), so the
policies and score kinds are spelled here; ``tests/benchmarks/trec/test_trec_export_cli.py`` checks
that they
agree with ``metricalc.retrieval.export``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

POLICIES = ("optimistic", "pessimistic", "workbench")
"""``metricalc.retrieval.export.EXPORT_POLICIES``."""
SCORES = ("tied", "ranked")
"""``metricalc.retrieval.export.SCORES``."""
DEPTH = 1000
"""``metricalc.retrieval.export.DEFAULT_DEPTH``."""


def add_trec_export(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc trec-export cube CUBE ...`` and ``metricalc trec-export patches ...``."""
    export = verbs.add_parser(
        "trec-export", help="write a cube or patch retrieval results as TREC run and qrels files"
    )
    kinds = export.add_subparsers(dest="export_kind", metavar="KIND", required=True)
    cube = kinds.add_parser(
        "cube",
        help="one descriptor of a keypoint cube as a run of placeholder documents",
        description=(
            "Write one descriptor of a keypoint QueryCube as a TREC run and qrels: per query with "
            "a relevant keypoint, BETTER placeholders scored above the relevant document and TIES "
            "placeholders tied with it, ordered by docno so that trec_eval ranks the relevant "
            "document as the tie policy does. trec_eval's map / recip_rank 'all' is then the "
            "cube's true_map_micro under that policy."
        ),
    )
    cube.add_argument("cube", type=Path, metavar="CUBE", help="cube file (.nc)")
    cube.add_argument("--descriptor", required=True, help="the descriptor to export")
    cube.add_argument("--tie-policy", "--policy", required=True, metavar="POLICY",
                      help=f"tie policy the run holds: {', '.join(POLICIES)} ('expected' is a "
                      "mean over orders: use trec-eval --tie-policy expected on the run)")
    cube.add_argument("--out-run", type=Path, required=True, metavar="FILE", help="run to write")
    cube.add_argument("--out-qrels", type=Path, required=True, metavar="FILE",
                      help="qrels to write")
    cube.add_argument("--depth", type=int, default=DEPTH,
                      help="documents written per query at most; 0: all (a relevant document "
                      "beyond it counts as not retrieved)")
    cube.add_argument("--include-zeros", action="store_true",
                      help="write the queries without a relevant keypoint to the qrels (not the "
                      "run): trec_eval -c then gives true_map_micro_including_zeros")
    cube.add_argument("--scores", choices=SCORES, default="tied",
                      help="tied (default): the tie group keeps one score and docnos set the "
                      "order (trec_eval, pytrec_eval); ranked: one distinct score per rank, for "
                      "tools that order ties otherwise (ranx)")
    cube.add_argument("--tag", help="run tag (default: the descriptor)")
    cube.set_defaults(run=_export_cube)
    patches = kinds.add_parser(
        "patches",
        help="a patch retrieval .results file as a run, with patch (and image) qrels",
        description=(
            "Write an HPatches .results file as a TREC run (ranks 2..51, scores 50..1) with "
            "qrels for patch retrieval (the query's cluster) and optionally image retrieval."
        ),
    )
    patches.add_argument("--benchmark", type=Path, required=True, help="a .benchmark file")
    patches.add_argument("--labels", type=Path, required=True, help="its .labels file")
    patches.add_argument("--results", type=Path, required=True, help="a .results file")
    patches.add_argument("--out-run", type=Path, required=True, metavar="FILE",
                         help="run to write")
    patches.add_argument("--out-qrels", type=Path, required=True, metavar="FILE",
                         help="patch retrieval qrels to write")
    patches.add_argument("--out-image-qrels", type=Path, metavar="FILE",
                         help="image retrieval qrels to write")
    patches.add_argument("--tag", help="run tag (default: the results file's stem)")
    patches.set_defaults(run=_export_patches)


def _export_cube(args: argparse.Namespace) -> int:
    from metricalc.cube import open_cube
    from metricalc.errors import InvalidInputError
    from metricalc.retrieval.export import export_cube

    if args.depth < 0:
        raise InvalidInputError(f"--depth must be >= 0 (0: all documents); got {args.depth}")
    done = export_cube(
        open_cube(args.cube), args.descriptor, run=args.out_run, qrels=args.out_qrels,
        tie_policy=args.tie_policy, depth=args.depth or None, include_zeros=args.include_zeros,
        scores=args.scores, tag=args.tag,
    )
    zeros = f" and {done.n_zeros} without" if args.include_zeros else ""
    print(f"wrote {done.run} ({done.n_lines} lines) and {done.qrels}: {done.n_queries} queries "
          f"with a relevant keypoint{zeros}, {done.tie_policy} ties")
    if done.n_beyond_depth:
        print(f"metricalc: note: {done.n_beyond_depth} relevant documents rank beyond --depth "
              f"{done.depth} and are not written: trec_eval scores their queries 0 (--depth 0 "
              "writes all)", file=sys.stderr)
    return 0


def _export_patches(args: argparse.Namespace) -> int:
    from metricalc.benchmarks.hpatches_patches import read_benchmark, read_labels, read_results
    from metricalc.benchmarks.hpatches_patches.trec import export_trec

    done = export_trec(
        read_benchmark(args.benchmark), read_labels(args.labels), read_results(args.results),
        run=args.out_run, qrels=args.out_qrels, image_qrels=args.out_image_qrels, tag=args.tag,
    )
    image = f" and {done.image_qrels}" if done.image_qrels is not None else ""
    print(f"wrote {done.run} ({done.n_lines} lines, {done.n_queries} queries), {done.qrels}"
          f"{image}")
    return 0
