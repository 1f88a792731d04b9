"""``metricalc report STUDY`` (render a study specification)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_report(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc report STUDY [--out DIR]``: tables, tests, figures and the HTML page."""
    report = verbs.add_parser(
        "report", help="render a study (reports/<study>.yaml): tables, tests, figures, HTML"
    )
    report.add_argument("study", type=Path, help="study specification (YAML)")
    report.add_argument(
        "--out",
        type=Path,
        help="folder of the study folders: the study's data go to DIR/<study>/, its report to "
        "DIR/<study>/report/ (default: the study file's folder, reports/<study>/report/)",
    )
    report.add_argument("--no-progress", action="store_true", help="no progress bars")
    report.set_defaults(run=_report)


def _report(args: argparse.Namespace) -> int:
    from metricalc.report.builder import REPORT_FOLDER, build
    from metricalc.report.study import load_study

    study = load_study(args.study)
    folder = args.out / study.name if args.out is not None else study.default_out()
    report = build(  # one folder per study: its data, and the report in a folder of its own
        study, out=folder / REPORT_FOLDER, data=folder, progress=not args.no_progress
    )
    print(f"wrote {len(report.files)} files to {report.out}")
    print(f"report: {report.html}")
    return 0
