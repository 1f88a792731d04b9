"""The ``metricalc`` command. Thin: every verb parses arguments and calls the library.

One module per verb group, each with ``add_<verb>(verbs)`` functions that add a verb (and its
sub-verbs) to the sub-command parsers and set ``run``, the function the verb calls:

- :mod:`~metricalc.benchmarks.hpatches_sequences.cli`: ``demo``, ``keypoints make-dataset | eval``,
  ``metrics``;
- :mod:`~metricalc.benchmarks.hpatches_patches.cli`: ``patches eval | compute | make-dataset |
  make-benchmark |
  describe``;
- :mod:`~metricalc.benchmarks.twoview.cli`: ``pose eval | make-dataset``;
- :mod:`~metricalc.cli.experiments`: ``run hpatches | patches``, ``inspect``;
- :mod:`~metricalc.cli.db`: ``db list | show | export | import-workbench``;
- :mod:`~metricalc.cli.decompose`: ``decompose detection | keypoints``;
- :mod:`~metricalc.cli.compare`: ``compare``;
- :mod:`~metricalc.cli.report`: ``report``;
- :mod:`~metricalc.cli.reported`: ``reported``;
- :mod:`~metricalc.benchmarks.trec.cli`: ``trec-eval``;
- :mod:`~metricalc.benchmarks.trec.export_cli`: ``trec-export cube | patches``;
- :mod:`~metricalc.commands.args`: the argument types they share.

Building the parser imports no heavy module (experiment runs, dask, matplotlib, statsmodels,
OpenCV): a verb imports what it calls when it runs, so ``metricalc --help`` starts fast. Running a
verb (``metricalc trec-eval ...``) imports that verb's module only (:data:`VERBS`). A verb that
needs an optional dependency that is not installed stops with one line naming the extra to install
(``pip install "metricalc[vision]"``) and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module

from metricalc.errors import MetricalcError

VERBS: dict[str, str] = {
    "demo": "metricalc.benchmarks.hpatches_sequences.cli.add_demo",
    "keypoints": "metricalc.benchmarks.hpatches_sequences.cli.add_keypoints",
    "patches": "metricalc.benchmarks.hpatches_patches.cli.add_patches",
    "pose": "metricalc.benchmarks.twoview.cli.add_pose",
    "run": "metricalc.cli.experiments.add_run",
    "inspect": "metricalc.cli.experiments.add_inspect",
    "metrics": "metricalc.benchmarks.hpatches_sequences.cli.add_metrics",
    "db": "metricalc.cli.db.add_db",
    "decompose": "metricalc.cli.decompose.add_decompose",
    "compare": "metricalc.cli.compare.add_compare",
    "report": "metricalc.cli.report.add_report",
    "reported": "metricalc.cli.reported.add_reported",
    "trec-eval": "metricalc.benchmarks.trec.cli.add_trec_eval",
    "trec-export": "metricalc.benchmarks.trec.export_cli.add_trec_export",
}
"""Each verb and the function adding it (``package.module.function``: the verbs of a benchmark
live in its room), in the order
``metricalc --help`` lists them. ``metricalc VERB ...`` imports the module of ``VERB`` only."""

VERB_EXTRAS: dict[str, str] = {"demo": "demo", "run": "experiments", "inspect": "experiments"}
"""Verbs that need several extras, and the extra that installs all of them: named when any of
their optional dependencies is missing (any other verb names the missing library's own extra)."""

RENAMED_VERBS: dict[str, str] = {"eval": "run"}
"""Old spellings of verbs, still accepted with a note on stderr: ``metricalc eval hpatches`` is
``metricalc run hpatches`` (an experiment run), so that no two verbs differ only in word order
(``keypoints eval`` evaluates image sequences into a cube)."""


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``metricalc`` command, one sub-command per verb; with ``verb``
    (a key of :data:`VERBS`), that verb's sub-command only, importing that verb's module only."""
    from metricalc.commands.args import VerbParser, document_defaults

    parser = argparse.ArgumentParser(
        prog="metricalc",
        description=(
            "Decomposable metrics for evaluating local image descriptors: confusion counts, "
            "curves, AP and mAP over descriptor x scene x query cubes."
        ),
    )
    parser.add_argument("--version", action=ShowVersion)
    verbs: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="verb", metavar="VERB", parser_class=VerbParser
    )
    for name, where in VERBS.items():
        if verb is None or name == verb:
            module, function = where.rsplit(".", 1)
            getattr(import_module(module), function)(verbs)
    document_defaults(parser)  # every --help shows the defaults
    return parser


class ShowVersion(argparse.Action):
    """``--version``: print ``metricalc VERSION`` and stop. The version is read from the installed
    package's metadata only then (``importlib.metadata`` takes a fifth of ``metricalc trec-eval
    --help``'s time)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from metricalc.version import __version__

        print(f"metricalc {__version__}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    given = sys.argv[1:] if argv is None else list(argv)
    if given and given[0] in RENAMED_VERBS:
        new = RENAMED_VERBS[given[0]]
        print(f"metricalc: note: `metricalc {given[0]}` is now `metricalc {new}`", file=sys.stderr)
        given[0] = new
    # the verb comes first (the command's own options, --help and --version, print and stop)
    parser = build_parser(given[0] if given and given[0] in VERBS else None)
    args = parser.parse_args(given)
    if args.verb is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args))
    except MetricalcError as error:
        print(f"metricalc: error: {one_line(str(error))}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:  # an optional dependency of the verb: name its extra
        from metricalc.lazy import missing_extra

        missing = missing_extra(error, f"metricalc {args.verb}", VERB_EXTRAS.get(args.verb))
        if missing is None:
            raise
        print(f"metricalc: error: {missing}", file=sys.stderr)
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
