"""The ``metricalc`` command. Thin: every verb parses arguments and calls the library.

One module per verb group, each with ``add_<verb>(verbs)`` functions that add a verb (and its
sub-verbs) to the sub-command parsers and set ``run``, the function the verb calls:

- :mod:`~metricalc.cli.keypoints`: ``demo``, ``keypoints make-dataset | eval``, ``metrics``;
- :mod:`~metricalc.cli.patches`: ``patches eval | compute | make-dataset | make-benchmark |
  describe``;
- :mod:`~metricalc.cli.pose`: ``pose eval | make-dataset``;
- :mod:`~metricalc.cli.experiments`: ``eval hpatches | patches``, ``inspect``;
- :mod:`~metricalc.cli.db`: ``db list | show | export | import-workbench``;
- :mod:`~metricalc.cli.decompose`: ``decompose detection | keypoints``;
- :mod:`~metricalc.cli.compare`: ``compare``;
- :mod:`~metricalc.cli.report`: ``report``;
- :mod:`~metricalc.cli.reported`: ``reported``;
- :mod:`~metricalc.cli.trec`: ``trec-eval``;
- :mod:`~metricalc.cli.trec_export`: ``trec-export cube | patches``;
- :mod:`~metricalc.cli._args`: the argument types they share.

Building the parser imports no heavy module (experiment runs, dask, matplotlib, statsmodels,
OpenCV): a verb imports what it calls when it runs, so ``metricalc --help`` starts fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from metricalc.cli import (
    compare,
    db,
    decompose,
    experiments,
    keypoints,
    patches,
    pose,
    report,
    reported,
    trec,
    trec_export,
)
from metricalc.cli._args import VerbParser, document_defaults
from metricalc.errors import MetricalcError
from metricalc.version import __version__

VERBS = (
    keypoints.add_demo,
    keypoints.add_keypoints,
    patches.add_patches,
    pose.add_pose,
    experiments.add_eval,
    experiments.add_inspect,
    keypoints.add_metrics,
    db.add_db,
    decompose.add_decompose,
    compare.add_compare,
    report.add_report,
    reported.add_reported,
    trec.add_trec_eval,
    trec_export.add_trec_export,
)
"""The functions adding the verbs, in the order ``metricalc --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``metricalc`` command, one sub-command per verb."""
    parser = argparse.ArgumentParser(
        prog="metricalc",
        description=(
            "Decomposable metrics for evaluating local image descriptors: confusion counts, "
            "curves, AP and mAP over descriptor x scene x query cubes."
        ),
    )
    parser.add_argument("--version", action="version", version=f"metricalc {__version__}")
    verbs: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="verb", metavar="VERB", parser_class=VerbParser
    )
    for add_verb in VERBS:
        add_verb(verbs)
    document_defaults(parser)  # every --help shows the defaults
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
    except MetricalcError as error:
        print(f"metricalc: error: {one_line(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("metricalc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``metricalc ... --json | head``)
        return stdout_closed()
    except OSError as error:  # a file the verb reads or writes: a folder, no permission, full disk
        where = f" {error.filename}" if error.filename else ""
        reason = one_line(f"cannot use{where}: {error.strerror or error}")
        print(f"metricalc: error: {reason}", file=sys.stderr)
        return 2


def one_line(message: str) -> str:
    r"""``message`` as one line that the terminal shows as written: its lines joined by spaces
    and any other control character (the ESC of a terminal escape sequence) shown as ``\xNN``.

    Examples
    --------
    >>> one_line("x.yaml: not valid YAML: bad character\n  in '<unicode string>', position 0")
    "x.yaml: not valid YAML: bad character in '<unicode string>', position 0"
    >>> one_line("name 'a\x1b[31mb' unknown")
    "name 'a\\x1b[31mb' unknown"
    """
    from metricalc.plotting.terminal import visible

    return visible(" ".join(part.strip() for part in message.splitlines() if part.strip()))


SIGPIPE_EXIT = 141
"""Exit code when the reader of the output closed it: 128 + SIGPIPE, as a shell reports a
program that SIGPIPE stopped (``cat big | head``)."""


def stdout_closed() -> int:
    """Stop quietly after the reader closed standard output: point it at ``/dev/null`` so that
    the interpreter's last flush cannot raise again; returns :data:`SIGPIPE_EXIT`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (captured in-process)
        pass
    return SIGPIPE_EXIT
