"""``metricalc reported`` (the published numbers of :mod:`metricalc.datasets.reported`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

FIELDS = ("protocol", "dataset", "method", "metric")
"""The filters of the verb: fields of :class:`metricalc.datasets.reported.ReportedResult`."""


def add_reported(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc reported [KEY-PATTERN ...] [--protocol P] [--dataset D] [--method M]
    [--metric M] [--json]``: the published numbers a study's ``reported`` key can name."""
    reported = verbs.add_parser(
        "reported",
        help="list published numbers (value, protocol, paper, source) for reference rows",
    )
    reported.add_argument(
        "keys", nargs="*", metavar="KEY", help="keys or fnmatch patterns of keys (default: all)"
    )
    for field in FIELDS:
        reported.add_argument(f"--{field}", help=f"only the numbers of this {field}")
    reported.add_argument(
        "--json", action="store_true", help="print the entries as JSON (values as fractions)"
    )
    reported.set_defaults(run=_reported)


def _reported(args: argparse.Namespace) -> int:
    from rich.table import Table

    from metricalc.datasets.reported import REPORTED, select_reported
    from metricalc.plotting.terminal import print_table, printable

    filters = {f: getattr(args, f) for f in FIELDS if getattr(args, f) is not None}
    entries = select_reported(args.keys or ["*"])
    if filters:
        chosen = {e.key for e in select_reported([filters])}
        entries = tuple(e for e in entries if e.key in chosen)
    if args.json:
        print(json.dumps([asdict(e) for e in entries], indent=2))
        return 0
    table = Table(title=f"{len(entries)} of {len(REPORTED)} published numbers")
    for column in ("key", "value %", "dataset, setting", "checked", "source"):
        table.add_column(column, justify="right" if column == "value %" else "left")
    for e in entries:
        table.add_row(
            printable(e.key),
            f"{100 * e.value:.2f}",
            printable(f"{e.dataset}, {e.setting}"),
            "yes" if e.checked else "no",
            printable(e.source),
        )
    print_table(table)
    return 0
