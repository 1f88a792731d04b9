r"""Import of DescriptorWorkbench exports: its CSV files into a descriptor x scene cube, a check of
its summary columns against its own per-scene values, and experiments in the results database.

A DescriptorWorkbench export is a CSV file with one row per workbench experiment (one descriptor
configuration run on one dataset): an ``experiment_id``, a ``descriptor_type``, summary columns
(``true_map_macro``, ``true_map_micro``, their ``_with_zeros`` variants, ``precision_at_1``, ...)
and, in the detailed export, a ``metadata`` string (``key=value;``, :mod:`metricalc.store.metadata`)
holding per-scene keys ``<scene>_true_map``, ``<scene>_true_map_with_zeros``,
``<scene>_query_count`` and ``<scene>_excluded_count``.

:func:`read_workbench` parses the file and recomputes each summary from the scenes:

.. math::

    \text{true\_map\_macro} = \operatorname{mean}_{s : q_s > 0} m_s, \qquad
    \text{true\_map\_micro} = \frac{\sum_s m_s q_s}{\sum_s q_s}

    \text{true\_map\_macro\_with\_zeros} = \operatorname{mean}_{s : q_s > 0} z_s, \qquad
    \text{true\_map\_micro\_with\_zeros} = \frac{\sum_s m_s q_s}{\sum_s (q_s + e_s)}

    \text{viewpoint\_map} = \operatorname{mean}_{s \in V : q_s > 0} m_s, \qquad
    \text{viewpoint\_map\_including\_zeros} = \operatorname{mean}_{s \in V : q_s + e_s > 0} z_s,
    \qquad \text{viewpoint\_map\_micro} = \frac{\sum_{s \in V} m_s q_s}{\sum_{s \in V} q_s}

with :math:`m_s`, :math:`z_s`, :math:`q_s`, :math:`e_s` the scene's ``true_map``,
``true_map_with_zeros``, ``query_count`` and ``excluded_count``, and :math:`V` the scenes whose
name starts with ``v`` (``illumination_*`` likewise over those starting with ``i``): the
definitions of :func:`metricalc.metric_set`, which are DescriptorWorkbench's. The export has no
split columns, so the split mAPs (:data:`SPLIT_MAPS`) are recomputed and stored, not checked.
DescriptorWorkbench writes the keys of a scene only when it has an R = 1 query, so a scene
whose queries all have R = 0 is absent from its metadata. The metadata holds each
:math:`m_s` rounded to 6 decimals (error at most :math:`5 \cdot 10^{-7}`), and a mean or a
weighted mean with weights summing to at most 1 keeps that bound, so a recomputed value must be
within :data:`MAP_TOLERANCE` = :math:`5 \cdot 10^{-7}` of the file's full-precision column; the
per-scene counts must add up exactly to ``total_queries_processed`` / ``total_queries_excluded``.
A row that does not is reported (and stored with status ``mismatch``).
:func:`import_workbench` also stores every row as an experiment of benchmark
:data:`WORKBENCH_BENCHMARK` (``docs/store.md``, "The DescriptorWorkbench import").

The jobs are modules of their own: :mod:`~metricalc.store.workbench_file` parses the CSV,
:mod:`~metricalc.store.workbench_check` recomputes and checks, this module builds the cube,
:mod:`~metricalc.store.workbench_store` writes the experiments and
:mod:`~metricalc.store.workbench_cube` reads the cube back for ``metrics`` and ``compare``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.fileio import hdf5_target
from metricalc.metrics import SPLIT_LETTERS
from metricalc.store.workbench_check import (
    CHECKS,
    MAP_TOLERANCE,
    SPLIT_MAPS,
    check_rows,
    failed_by_line,
    row_status,
)
from metricalc.store.workbench_cube import HIT_RATES, WORKBENCH_FORMAT
from metricalc.store.workbench_file import METRIC_COLUMNS, WorkbenchRow, read_rows
from metricalc.store.workbench_store import WORKBENCH_BENCHMARK, store_rows
from metricalc.validation import check_number, is_real

__all__ = [
    "MAP_TOLERANCE",
    "SPLIT_MAPS",
    "WORKBENCH_BENCHMARK",
    "WorkbenchExport",
    "import_workbench",
    "read_workbench",
    "write_cube",
]


@dataclass(frozen=True)
class WorkbenchExport:
    """A DescriptorWorkbench export read by :func:`read_workbench`; each field is described
    where it is declared."""

    path: Path
    """The CSV file."""
    rows: list[WorkbenchRow]
    """The parsed rows (internal form)."""
    checks: pd.DataFrame
    """One row per (file row, check): ``line``, ``experiment_id``, ``descriptor``, ``check`` (a
    name of :data:`~metricalc.store.workbench_check.CHECKS`), ``file`` (the file's value),
    ``recomputed`` (from the scenes), ``difference`` (file - recomputed), ``tolerance``
    (:data:`MAP_TOLERANCE`, 0 for counts), ``n_scenes``, ``ok``. Empty without metadata."""
    cube: xr.Dataset | None
    """Over ``(descriptor, scene)`` (None when no row has per-scene metadata): ``true_map``,
    ``true_map_with_zeros`` (NaN where a row lacks the scene), ``query_count``,
    ``excluded_count`` (0 there); over ``descriptor``: each checked mAP as in the file and as
    ``<name>_recomputed``, ``status`` (``ok`` | ``mismatch`` | ``error``); coordinates
    ``experiment_id``, ``line`` (descriptor) and ``split`` (scene). A ``descriptor_type`` found
    on several rows is labelled ``<descriptor_type>#<experiment_id>``."""
    tolerance: float = MAP_TOLERANCE
    """The largest accepted difference of an mAP (:func:`read_workbench`'s ``tolerance``)."""
    tags: tuple[str, ...] = field(default=())
    """The tags the rows were stored under (set by :func:`import_workbench`)."""
    recomputed: dict[int, dict[str, float]] = field(default_factory=dict, repr=False)
    """Per file line, the values recomputed from the row's scenes (the checks and the split
    mAPs of :data:`SPLIT_MAPS` stored with the import)."""

    @property
    def mismatches(self) -> pd.DataFrame:
        """The failed checks (rows of :attr:`checks` with ``ok`` false)."""
        return self.checks[~self.checks["ok"]].reset_index(drop=True)

    @property
    def absent_columns(self) -> list[str]:
        """The result columns of :data:`~metricalc.store.workbench_file.METRIC_COLUMNS` the
        file does not have: stored as NULL, and said so by ``db import-workbench``."""
        present = set(self.rows[0].values) if self.rows else set()
        if "processing_time_s" in present:  # the summary export's form of processing_time_ms
            present.add("processing_time_ms")
        return [column for column in METRIC_COLUMNS if column not in present]

    @property
    def checked_rows(self) -> int:
        """Number of file rows with per-scene metadata (the rows that could be checked)."""
        return sum(1 for row in self.rows if row.scenes)


def _labels(rows: list[WorkbenchRow]) -> list[str]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.descriptor] = counts.get(row.descriptor, 0) + 1
    return [
        row.descriptor if counts[row.descriptor] == 1 else f"{row.descriptor}#{row.experiment_id}"
        for row in rows
    ]


def _number_or_nan(value: object) -> float:
    return float(value) if is_real(value) else np.nan


def _cube(
    path: Path,
    rows: list[WorkbenchRow],
    checks: pd.DataFrame,
    recomputed: dict[int, dict[str, float]],
    tolerance: float,
) -> xr.Dataset | None:
    rows = [row for row in rows if row.scenes]
    if not rows:
        return None
    failed = failed_by_line(checks)
    scenes = sorted({s for row in rows for s in row.scenes})
    data = _scene_grid(rows, scenes)
    checked = [c for c in CHECKS if not c.startswith("total_") and c in rows[0].values]
    data.update(_checked_values(rows, checked, recomputed))
    data.update(_hit_rates(rows))
    data["status"] = (
        "descriptor",
        np.array([row_status(r, failed.get(r.line, []))[0] for r in rows]),
    )
    letters = {letter: split for split, letter in SPLIT_LETTERS}
    splits = [letters.get(s[:1], "other") for s in scenes]
    return xr.Dataset(
        data,
        coords={
            "descriptor": _labels(rows),
            "scene": scenes,
            "experiment_id": ("descriptor", np.array([r.experiment_id for r in rows], np.int64)),
            "line": ("descriptor", np.array([r.line for r in rows], np.int64)),
            "split": ("scene", splits),
        },
        attrs={
            "source": str(path),
            "format": WORKBENCH_FORMAT,
            "tolerance": tolerance,
            "checked": checked,
        },
    )


def _scene_grid(rows: list[WorkbenchRow], scenes: list[str]) -> dict[str, Any]:
    """The per-scene variables over (descriptor, scene): NaN mAPs and 0 counts where a row
    lacks the scene."""
    column = {s: j for j, s in enumerate(scenes)}
    shape = (len(rows), len(scenes))
    maps = np.full((2, *shape), np.nan)
    counts = np.zeros((2, *shape), np.int64)
    for i, row in enumerate(rows):
        for scene, (m, z, q, e) in row.scenes.items():
            j = column[scene]
            maps[:, i, j] = (m, z)
            counts[:, i, j] = (q, e)
    two = ("descriptor", "scene")
    return {
        "true_map": (two, maps[0]),
        "true_map_with_zeros": (two, maps[1]),
        "query_count": (two, counts[0]),
        "excluded_count": (two, counts[1]),
    }


def _checked_values(
    rows: list[WorkbenchRow], checked: list[str], recomputed: dict[int, dict[str, float]]
) -> dict[str, Any]:
    """Each checked mAP over ``descriptor``, as in the file and as ``<name>_recomputed``."""
    data: dict[str, Any] = {}
    for name in checked:
        data[name] = (
            "descriptor",
            np.array([np.nan if r.values[name] is None else r.values[name] for r in rows]),
        )
        data[f"{name}_recomputed"] = (
            "descriptor",
            np.array([recomputed[r.line][name] for r in rows]),
        )
    return data


def _hit_rates(rows: list[WorkbenchRow]) -> dict[str, Any]:
    """The hit rates of :data:`~metricalc.store.workbench_cube.HIT_RATES` some row has, as
    ``hit_rate_at_<k>``."""
    data: dict[str, Any] = {}
    for k, name in HIT_RATES.items():
        hits = [r.values.get(name, r.meta.get(name)) for r in rows]
        if any(is_real(h) for h in hits):
            data[f"hit_rate_at_{k}"] = ("descriptor", np.array([_number_or_nan(h) for h in hits]))
    return data


def read_workbench(
    path: str | os.PathLike[str], *, tolerance: float = MAP_TOLERANCE
) -> WorkbenchExport:
    """Read a DescriptorWorkbench export CSV, build its descriptor x scene cube and check its
    summary columns against its per-scene metadata.

    Parameters
    ----------
    path : path
        The CSV file (e.g. ``descriptor_performance_analysis.csv``; a file without a
        ``metadata`` column, like ``experiment_summary_full.csv``, is read but has no cube and
        nothing to check).
    tolerance : float
        Largest accepted ``abs(file - recomputed)`` of an mAP (default :data:`MAP_TOLERANCE`, the
        rounding bound of the metadata's 6 decimals).

    Returns
    -------
    WorkbenchExport
        The rows, the checks (:attr:`WorkbenchExport.checks`, failures in
        :attr:`WorkbenchExport.mismatches`) and the cube.

    Raises
    ------
    InvalidInputError
        A missing or empty file, a missing column, a row with the wrong number of fields, a
        value that is not a number, a repeated ``experiment_id``, a metadata string that does not
        parse, a scene lacking one of its four keys, or a scene value of the wrong type or range;
        the message names the file, the line and the column or key.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from metricalc.store.workbench import read_workbench
    >>> text = ("experiment_id,descriptor_type,true_map_macro,true_map_micro,metadata\\n"
    ...         "7,sift,0.55,0.533333,i_a_excluded_count=0;i_a_query_count=10;"
    ...         "i_a_true_map=0.500000;"
    ...         "i_a_true_map_with_zeros=0.500000;v_b_excluded_count=5;v_b_query_count=5;"
    ...         "v_b_true_map=0.600000;v_b_true_map_with_zeros=0.300000;\\n")
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     csv_path = pathlib.Path(tmp) / "export.csv"
    ...     _ = csv_path.write_text(text)
    ...     export = read_workbench(csv_path)
    >>> export.cube.true_map.sel(descriptor="sift").values.tolist()
    [0.5, 0.6]
    >>> for check in export.checks.itertuples():
    ...     print(check.check, check.file, round(check.recomputed, 6), check.ok)
    true_map_macro 0.55 0.55 True
    true_map_micro 0.533333 0.533333 True
    """
    limit = check_number("tolerance", tolerance, minimum=0)
    path = Path(path)
    rows = read_rows(path)
    checks, recomputed = check_rows(rows, limit, path)
    cube = _cube(path, rows, checks, recomputed, limit)
    return WorkbenchExport(path, rows, checks, cube, limit, recomputed=recomputed)


def write_cube(cube: xr.Dataset, path: str | os.PathLike[str]) -> Path:
    """Write the cube of a :class:`WorkbenchExport` to a netCDF-4 file (h5netcdf), atomically."""
    target = Path(path)
    if target.is_dir():
        raise InvalidInputError(f"cube path {target} is a directory; expected a file name (.nc)")
    with hdf5_target(target, estimate=int(cube.nbytes)) as where:  # a full disk: an OSError
        cube.to_netcdf(where, engine="h5netcdf")
    return target


def import_workbench(
    path: str | os.PathLike[str] | WorkbenchExport,
    *,
    db: str | os.PathLike[str],
    tag_prefix: str = "dw-",
    overwrite: bool = False,
    tolerance: float = MAP_TOLERANCE,
) -> WorkbenchExport:
    """Read (:func:`read_workbench`) and store a DescriptorWorkbench export in the database.

    Every row becomes one experiment of benchmark :data:`WORKBENCH_BENCHMARK` tagged
    ``<tag_prefix><experiment_id>`` (DescriptorWorkbench's own unit: one experiment, one
    descriptor), with one ``results`` row (descriptor = ``descriptor_type``) and its scene rows;
    see ``docs/store.md`` for where each column goes. The whole file is one transaction: all
    rows are stored or none.

    Parameters
    ----------
    path : path or WorkbenchExport
        The CSV file, or an export already read.
    db : path
        The database file.
    tag_prefix : str
        Prefix of the tags (``dw-`` gives ``dw-42``).
    overwrite : bool
        Replace experiments of the same tag that came from a different source or row (a
        different config hash). Without it such a clash is refused, naming the tags; a tag whose
        stored config is the same (the same file imported again) is replaced quietly.
    tolerance : float
        See :func:`read_workbench`.

    Returns
    -------
    WorkbenchExport
        With :attr:`~WorkbenchExport.tags` set.
    """
    export = (
        path if isinstance(path, WorkbenchExport) else read_workbench(path, tolerance=tolerance)
    )
    if not isinstance(tag_prefix, str):
        raise InvalidInputError(f"tag_prefix must be a string; got {tag_prefix!r}")
    tags = store_rows(
        db,
        export.rows,
        source=export.path.name,
        failed=failed_by_line(export.checks),
        recomputed=export.recomputed,
        tag_prefix=tag_prefix,
        overwrite=overwrite,
    )
    return replace(export, tags=tuple(tags))
