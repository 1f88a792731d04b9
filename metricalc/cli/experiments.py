"""``metricalc run hpatches | patches`` (experiment runs) and ``metricalc inspect`` (pages).

Building these parsers must not import :mod:`metricalc.experiment` (OpenCV, dask, matplotlib,
statsmodels: seconds of start-up for ``metricalc --help``), so the two values the parsers need are
spelled here; ``tests/cli/test_cli.py`` checks that they agree with :mod:`metricalc.experiment.run`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from metricalc.commands.args import add_preset_option, passed
from metricalc.errors import MetricalcError

BENCHMARK_NAMES = ("hpatches", "patches")
"""The benchmarks of experiment runs: the keys of ``metricalc.experiment.run.BENCHMARKS``."""

DEFAULT_OUTPUTS = Path("outputs")
"""The outputs root of runs: ``metricalc.experiment.run.DEFAULT_OUTPUTS``."""


def add_run(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc run hpatches | patches [options] [key=value ...]``."""
    ev_run = verbs.add_parser(
        "run", help="experiment runs: export predictions once, evaluate the cache"
    )
    benchmarks = ev_run.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    hpatches = benchmarks.add_parser(
        "hpatches", help="image sequences: keypoints, matches, homography estimation"
    )
    _eval_arguments(hpatches, "run hpatches")
    hpatches.set_defaults(run=_eval)
    patch_run = benchmarks.add_parser(
        "patches", help="patch and image retrieval (HPatches ECCV 2016): descriptors, top-51 lists"
    )
    _eval_arguments(patch_run, "run patches")
    patch_run.set_defaults(run=_eval)


def add_inspect(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc inspect <benchmark> TAG ...`` (summaries side by side, the per-unit page)."""
    inspect = verbs.add_parser(
        "inspect",
        help="compare runs: summaries side by side, an interactive per-pair (per-file) page",
    )
    inspect.add_argument("benchmark", choices=BENCHMARK_NAMES, help="the benchmark of the runs")
    inspect.add_argument(
        "tags", nargs="+", metavar="TAG", help="experiment tags (the first is the reference)"
    )
    _outputs_argument(inspect)
    inspect.add_argument(
        "--out",
        type=Path,
        help="HTML page to write (default: <outputs>/inspect/<benchmark>/<tag1>_vs_<tag2>.html)",
    )
    inspect.set_defaults(run=_inspect)


def _outputs_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--outputs", type=Path, default=DEFAULT_OUTPUTS, help="outputs root (default: outputs)"
    )


def _eval_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--conf", help="config file, or a shipped config name (sift, orb, ...)")
    add_preset_option(
        parser,
        verb,
        "a protocol (docs/presets.md): its settings are defaults that --conf and key=value "
        "overrides still override",
    )
    parser.add_argument(
        "--tag", help="experiment name (default: the config name, else the preset name)"
    )
    parser.add_argument("--overwrite", action="store_true", help="redo export and evaluation")
    parser.add_argument(
        "--overwrite_eval",
        "--overwrite-eval",
        dest="overwrite_eval",
        action="store_true",
        help="redo the evaluation on the cached predictions",
    )
    parser.add_argument(
        "--scheduler",
        default="threads",
        help="threads (default), processes, synchronous, or a dask scheduler address",
    )
    parser.add_argument("--workers", type=int, help="local workers (default: CPU count)")
    _outputs_argument(parser)
    parser.add_argument(
        "--db",
        type=Path,
        help="results database the run is recorded in (default: <outputs>/metricalc.sqlite)",
    )
    parser.add_argument("--json", action="store_true", help="print summaries.json")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides (after the options)"
    )


_RUN_OPTIONS = (
    "preset",
    "tag",
    "overrides",
    "overwrite",
    "overwrite_eval",
    "scheduler",
    "workers",
    "outputs",
)
"""The options of ``run`` that :func:`metricalc.experiment.run` takes as they are."""


def _eval(args: argparse.Namespace) -> int:
    from metricalc.experiment import run
    from metricalc.experiment.terminal import print_summaries

    result = run(
        args.benchmark,
        args.conf,
        **passed(args, *_RUN_OPTIONS),
        db=args.db if args.db is not None else True,
        progress=not args.no_progress,
    )
    if result.status != "ok":
        print(f"metricalc: error: run {result.tag!r} failed: {result.error}", file=sys.stderr)
        if result.db is not None:
            print(f"recorded as failed in {result.db}", file=sys.stderr)
        return 2 if isinstance(result.exception, MetricalcError) else 1
    if args.json:
        print(json.dumps(result.summaries, indent=2))
        return 0
    done = [w for w, ran in (("exported", result.exported), ("evaluated", result.evaluated)) if ran]
    title = f"{args.benchmark} / {result.tag} ({', '.join(done) or 'cached'})"
    print_summaries({result.tag: result.summaries}, title=title)
    if result.pairs is not None and "file" in result.pairs.dims:  # patches: per benchmark file
        from metricalc.plotting.terminal import print_frame

        print_frame(result.pairs.to_dataframe().reset_index(), title="benchmark files")
    print(f"outputs in {result.directory}")
    if result.db is not None:
        print(f"recorded in {result.db}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from metricalc.experiment.inspect import (
        default_page_path,
        load_runs,
        setting_differences,
        setting_labels,
        write_page,
    )
    from metricalc.experiment.terminal import print_summaries

    inspection = load_runs(args.benchmark, args.tags, outputs=args.outputs)
    title = f"{args.benchmark}: {', '.join(inspection.tags)}"
    differences = setting_differences(inspection)
    if differences:  # shown side by side, never silently
        print("note: these runs were evaluated with different settings:")
        for key, values in differences.items():
            print(f"  {key}: " + ", ".join(f"{tag} {value}" for tag, value in values.items()))
    labels = setting_labels(inspection)
    print_summaries({labels[t]: inspection.summaries[t] for t in inspection.tags}, title=title)
    out = args.out or default_page_path(args.benchmark, inspection.tags, outputs=args.outputs)
    print(f"wrote {write_page(inspection, out)}")
    return 0
