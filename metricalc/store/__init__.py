"""The results database: experiments, results and per-scene rows in one SQLite file.

``record_experiment`` writes one run (its config, versions, timings, status, the metric set and
per-scene metrics); ``list_experiments``, ``get_experiment`` and ``to_dataframe`` read them back;
``export_table`` writes a table as CSV, JSON or Parquet; ``read_workbench`` / ``import_workbench``
bring in a DescriptorWorkbench export. ``docs/store.md`` describes the schema, the migrations
and the concurrency rules.
"""

from metricalc.store.database import BUSY_TIMEOUT_S, DEFAULT_DB, DatabaseBusyError, open_db
from metricalc.store.exports import FORMATS, export_table, to_dataframe
from metricalc.store.inputs import STATUSES, library_versions
from metricalc.store.metadata import SCENE_KEYS, format_metadata, metadata_for, parse_metadata
from metricalc.store.reading import Experiment, get_experiment, list_experiments
from metricalc.store.records import record_experiment
from metricalc.store.rows import COLUMN_SOURCES
from metricalc.store.schema import SCHEMA_VERSION, SEED_COLUMNS
from metricalc.store.workbench import (
    MAP_TOLERANCE,
    WORKBENCH_BENCHMARK,
    WorkbenchExport,
    import_workbench,
    read_workbench,
    write_cube,
)

__all__ = [
    "BUSY_TIMEOUT_S",
    "COLUMN_SOURCES",
    "DEFAULT_DB",
    "FORMATS",
    "MAP_TOLERANCE",
    "SCENE_KEYS",
    "SCHEMA_VERSION",
    "SEED_COLUMNS",
    "STATUSES",
    "WORKBENCH_BENCHMARK",
    "DatabaseBusyError",
    "Experiment",
    "WorkbenchExport",
    "export_table",
    "format_metadata",
    "get_experiment",
    "import_workbench",
    "library_versions",
    "list_experiments",
    "metadata_for",
    "open_db",
    "parse_metadata",
    "read_workbench",
    "record_experiment",
    "to_dataframe",
    "write_cube",
]
