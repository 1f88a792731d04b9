"""The ``metricalc`` command. Thin: every verb parses arguments and calls the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import metricalc

DEMO_PLAN = """\
metricalc demo: evaluate the built-in descriptors on the built-in benchmark.

The built-in benchmark (HPatches-style sequences made from the photographs bundled with
scikit-image) and the keypoint evaluation arrive with the keypoint-matching issue. When they do,
this verb will:
  1. write the synthetic sequences (illumination i_* and viewpoint v_* scenes, exact homographies),
  2. extract SIFT, RootSIFT, ORB and BRIEF features,
  3. build the QueryCube (better / ties / AP per query) and print the DescriptorWorkbench
     metric set.

Available now (Python API): confusion counts, rates and Wilson intervals, ROC and PR curves,
ROC AUC, average precision in six toolkit conventions, rank statistics with four tie policies,
hit rate and precision at k. See README.md and docs/.
"""


def _demo(_args: argparse.Namespace) -> int:
    print(DEMO_PLAN, end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``metricalc`` command, one sub-command per verb."""
    parser = argparse.ArgumentParser(
        prog="metricalc",
        description=(
            "Decomposable metrics for evaluating local image descriptors: confusion counts, "
            "curves, AP and mAP over descriptor x scene x query cubes."
        ),
    )
    parser.add_argument("--version", action="version", version=f"metricalc {metricalc.__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    demo = verbs.add_parser(
        "demo", help="evaluate the built-in descriptors on the built-in benchmark"
    )
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args))
    except metricalc.MetricalcError as error:
        print(f"metricalc: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
