"""``metricalc db list | show | export | import-workbench`` (the results database)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from metricalc.errors import InvalidInputError
from metricalc.store.database import DEFAULT_DB
from metricalc.store.exports import FORMATS
from metricalc.store.frames import FRAME_TABLES
from metricalc.store.workbench import MAP_TOLERANCE


def add_db(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``metricalc db ...``; every verb takes ``--db FILE``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db", type=Path, default=DEFAULT_DB, help=f"database file (default {DEFAULT_DB})"
    )
    db = verbs.add_parser("db", help="the results database: list, show, export, import")
    db_verbs = db.add_subparsers(dest="db_verb", metavar="VERB", required=True)
    listing = db_verbs.add_parser("list", parents=[common], help="the recorded experiments")
    listing.add_argument("--benchmark", help="only this benchmark")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_db_list)
    show = db_verbs.add_parser("show", parents=[common], help="one experiment and its results")
    show.add_argument("tag")
    show.add_argument("--benchmark", help="needed when several benchmarks have the tag")
    show.add_argument("--scenes", action="store_true", help="also the per-scene rows")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(run=_db_show)
    export = db_verbs.add_parser("export", parents=[common], help="a table as CSV, JSON, Parquet")
    export.add_argument("--format", choices=FORMATS, required=True)
    export.add_argument("--out", type=Path, help="file to write (default: stdout, csv/json)")
    export.add_argument("--table", choices=FRAME_TABLES, default="results")
    export.add_argument("--benchmark", help="only this benchmark")
    export.add_argument("--tag", action="append", help="only this tag (repeatable)")
    export.set_defaults(run=_db_export)
    wb = db_verbs.add_parser(
        "import-workbench", parents=[common], help="import a DescriptorWorkbench export CSV"
    )
    wb.add_argument("file", type=Path)
    wb.add_argument("--out", type=Path, help="write the descriptor x scene cube (.nc)")
    wb.add_argument("--tag-prefix", default="dw-", help="tags are <prefix><experiment_id>")
    wb.add_argument("--overwrite", action="store_true", help="replace clashing earlier imports")
    wb.add_argument(
        "--tolerance", type=float, default=MAP_TOLERANCE, help="largest |file - recomputed| mAP"
    )
    wb.add_argument("--json", action="store_true", help="print JSON")
    wb.set_defaults(run=_db_import_workbench)


def _db_list(args: argparse.Namespace) -> int:
    from metricalc.store import list_experiments
    from metricalc.store.display import print_experiments
    from metricalc.store.exports import frame_text

    frame = list_experiments(args.db, benchmark=args.benchmark)
    if args.json:
        print(frame_text(frame, "json"), end="")
    else:
        print_experiments(frame)
    return 0


def _db_show(args: argparse.Namespace) -> int:
    from metricalc.store import get_experiment
    from metricalc.store.display import print_experiment
    from metricalc.store.exports import frame_text

    experiment = get_experiment(args.db, args.tag, benchmark=args.benchmark)
    if args.json:
        header = {
            k: v for k, v in vars(experiment).items() if k not in ("results", "scenes")
        }
        results = json.loads(frame_text(experiment.results, "json"))
        scenes = json.loads(frame_text(experiment.scenes, "json"))
        print(json.dumps({**header, "results": results, "scenes": scenes}, indent=1))
    else:
        print_experiment(experiment, scenes=args.scenes)
    return 0


def _db_export(args: argparse.Namespace) -> int:
    from metricalc.store import export_table, to_dataframe
    from metricalc.store.exports import frame_text

    if args.out is None:
        if args.format == "parquet":
            raise InvalidInputError("--format parquet writes a binary file: give --out FILE")
        frame = to_dataframe(args.db, **_selection(args))
        sys.stdout.write(frame_text(frame, args.format))
        return 0
    export_table(args.db, args.out, format=args.format, **_selection(args))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    """The rows ``db export`` writes: ``--table``, ``--benchmark`` and ``--tag``."""
    return {"table": args.table, "benchmark": args.benchmark, "tags": args.tag}


def _db_import_workbench(args: argparse.Namespace) -> int:
    from metricalc.store.display import print_import
    from metricalc.store.workbench import import_workbench, read_workbench, write_cube

    export = read_workbench(args.file, tolerance=args.tolerance)
    if args.out is not None and export.cube is None:
        raise InvalidInputError(
            f"--out {args.out}: {args.file} has no per-scene metadata, so there is no cube to write"
        )
    export = import_workbench(
        export, db=args.db, tag_prefix=args.tag_prefix, overwrite=args.overwrite
    )
    if args.out is not None and export.cube is not None:
        write_cube(export.cube, args.out)
    if args.json:
        payload = {
            "file": str(export.path),
            "db": str(args.db),
            "rows": len(export.rows),
            "checked_rows": export.checked_rows,
            "tolerance": export.tolerance,
            "tags": list(export.tags),
            "absent_columns": export.absent_columns,
            "mismatches": export.mismatches.to_dict(orient="records"),
        }
        print(json.dumps(payload, indent=1))
    else:
        print_import(export, str(args.db))
        if args.out is not None:
            print(f"wrote {args.out}")
    return 1 if len(export.mismatches) else 0
