"""Inspect experiments side by side: their summaries, and an interactive per-unit scatter page.

``metricalc inspect <benchmark> TAG1 TAG2 ...`` (Glue Factory's ``gluefactory.eval.inspect``) reads
the run folders ``<outputs>/results/<benchmark>/<tag>/`` (``summaries.json`` and the per-unit
group of ``results.h5``, the benchmark's ``units_group``; nothing is recomputed), prints the
summaries side by side and writes one HTML page: a scatter of any two per-unit metrics, one point
per unit and experiment, with a ``diff_only`` mode relative to the first experiment, hover and
click. The units (:data:`UNITS`) are the image pairs of ``hpatches`` (group ``pairs``; a click
shows the pair's metrics and match visualizations) or the benchmark files of ``patches`` (group
``files``; a click shows the file's metrics: a file has no match picture). See
``docs/experiments.md`` ("Inspect"). The runs are read by
:func:`~metricalc.experiment.inspection.load_runs` (:mod:`metricalc.experiment.inspection`); this
module draws the page.

The page is self-contained except for the match pictures: its script, styles and data are inline
(no network access, no library), every name is escaped (jinja2 autoescaping for the markup,
:func:`json.dumps` with ``<``, ``>``, ``&`` escaped for the data, ``textContent`` in the
script). The pictures are *referenced* by their path relative to the page, not embedded: a full
HPatches run has 580 of them at several hundred kilobytes each, which as data URIs would make a
page of hundreds of megabytes per experiment, while the files already exist in the run folders
(written at export). Keep the page with its outputs folder (the default location is inside it).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.experiment.inspection import (
    UNITS,
    Inspection,
    Units,
    load_runs,
    setting_differences,
    setting_labels,
)
from metricalc.experiment.run import DEFAULT_OUTPUTS
from metricalc.experiment.terminal import SUMMARY_COLUMNS, _cell
from metricalc.fileio import atomic_write, json_safe
from metricalc.plotting.pages import page_environment

__all__ = [
    "COLORS",
    "DEFAULT_AXES",
    "UNITS",
    "Inspection",
    "Units",
    "default_page_path",
    "load_runs",
    "page_data",
    "render_page",
    "setting_differences",
    "setting_labels",
    "write_page",
]

COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
"""Point colours of the experiments, in order (repeated after ten)."""

DEFAULT_AXES = ("num_matches", "prec@3px")
"""The variables on the x and y axes when the page opens (when the runs have them; else the
first two variables)."""

# The page's data
# --------------------------------------------------------------------------------------------


def _number(value: Any) -> float | int | str | None:
    """A JSON value of a metric for the page's script: :func:`~metricalc.fileio.json_safe` (NaN
    -> None), except that infinities are kept as ``"inf"`` / ``"-inf"`` (JSON has no infinity,
    and an infinite error is not a missing value) and booleans are plotted as 0.0 / 1.0."""
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, float | np.floating) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    safe: float | int | str | None = json_safe(value)
    return safe


def _label(value: Any) -> str:
    value = value.decode() if isinstance(value, bytes) else value
    return f"{value:g}" if isinstance(value, float | np.floating) else str(value)


def _variables(pairs: xr.Dataset, unit_dim: str) -> dict[str, np.ndarray]:
    """The per-unit numeric variables: those over ``unit_dim`` as they are, those over
    ``(unit_dim, d)`` (the threshold sweep) one per label as ``name[d=label]``."""
    out: dict[str, np.ndarray] = {}
    for name, variable in pairs.data_vars.items():
        if unit_dim not in variable.dims or variable.dtype.kind not in "biuf":
            continue
        variable = variable.transpose(unit_dim, ...)
        if variable.ndim == 1:
            out[str(name)] = variable.values
        elif variable.ndim == 2:
            dim = str(variable.dims[1])
            for j, label in enumerate(variable[dim].values.tolist()):
                out[f"{name}[{dim}={_label(label)}]"] = variable.values[:, j]
    return out


def _url(target: Path, page_dir: Path) -> str:
    """The URL of ``target`` relative to the page's folder, each path segment percent-encoded
    (a file URI when no relative path exists, e.g. another drive)."""
    try:
        relative = os.path.relpath(target.resolve(), page_dir.resolve())
    except ValueError:
        return target.resolve().as_uri()
    return quote(Path(relative).as_posix())


def page_data(inspection: Inspection, *, page_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The data the page's script draws, as JSON-ready Python values.

    Keys: ``benchmark``; ``unit`` (what a point stands for: ``name``, ``short``, ``labels``,
    ``pictures`` of :class:`Units`); ``variables`` (the per-unit metrics of any run, in order of
    first appearance); ``axes`` (the initial x and y); ``pairs``, the units (image pairs or
    benchmark files), with ``id`` (``"<scene>/<pair>"`` or the file name, the sorted union over
    the runs) and one list per label coordinate (``scene``, ``pair``, ``split``; or ``split``,
    ``difficulty``, ``size``); ``experiments``, one per tag, with ``tag``, ``label`` (the tag
    and the settings in which the runs differ, :func:`setting_labels`), ``color``, ``present``
    (per unit: whether the run has it), ``missing`` (how many of the union it lacks),
    ``values`` (variable -> per-unit values: numbers, None for NaN or an absent unit or
    variable, ``"inf"`` / ``"-inf"``) and ``images`` (per unit: the match picture's URL relative
    to ``page_dir``, or None when the run lacks the unit or the file, or units have no pictures).

    Examples
    --------
    >>> import xarray as xr
    >>> pairs = xr.Dataset(
    ...     {"num_matches": ("image_pair", [12, 0])},
    ...     coords={"image_pair": ["v_a/1-2", "v_a/1-3"], "scene": ("image_pair", ["v_a"] * 2),
    ...             "pair": ("image_pair", ["1-2", "1-3"]), "split": ("image_pair", ["viewpoint"] * 2),
    ...             "match_image": ("image_pair", ["matches/v_a/1-2.png", "matches/v_a/1-3.png"])})
    >>> run = Inspection("hpatches", ("x",), {"x": Path("runs/x")}, {"x": {}}, {"x": pairs})
    >>> data = page_data(run, page_dir=".")
    >>> data["pairs"]["id"], data["experiments"][0]["values"]["num_matches"]
    (['v_a/1-2', 'v_a/1-3'], [12, 0])
    >>> data["experiments"][0]["images"]  # the files do not exist
    [None, None]
    """  # noqa: E501
    page_dir = Path(page_dir)
    units = inspection.units
    labels = [coordinate for coordinate, _ in units.labels]
    coords, variables, per_run = _units_of_runs(inspection, labels)
    order = sorted(coords)
    labels_of = setting_labels(inspection)
    experiments = []
    for k, tag in enumerate(inspection.tags):
        rows, columns = _run_columns(per_run[tag], order, variables)
        images = _run_images(inspection, tag, rows, len(order), page_dir)
        color = COLORS[k % len(COLORS)]
        experiments.append(
            {"tag": tag, "label": labels_of[tag], "color": color, **columns, "images": images}
        )
    names = list(variables)
    axes = [
        axis if axis in variables else names[min(i, len(names) - 1)]
        for i, axis in enumerate(DEFAULT_AXES)
    ] if names else []
    return {
        "benchmark": inspection.benchmark,
        "unit": {
            "name": units.name,
            "short": units.short,
            "labels": [list(label) for label in units.labels],
            "pictures": units.pictures,
        },
        "variables": names,
        "axes": axes,
        "pairs": {
            "id": order,
            **{c: [coords[n][j] for n in order] for j, c in enumerate(labels)},
        },
        "experiments": experiments,
    }


_RunUnits = tuple[list[str], dict[str, np.ndarray]]


def _units_of_runs(
    inspection: Inspection, labels: list[str]
) -> tuple[dict[str, tuple[str, ...]], dict[str, None], dict[str, _RunUnits]]:
    """The label coordinates of every unit of any run (from the first run that has it), the
    variables in order of first appearance, and per run its unit names and per-unit values."""
    units = inspection.units
    coords: dict[str, tuple[str, ...]] = {}
    variables: dict[str, None] = {}
    per_run: dict[str, _RunUnits] = {}
    for tag in inspection.tags:
        pairs = inspection.pairs[tag]
        names = [_label(v) for v in pairs[units.dim].values.tolist()]
        for i, name in enumerate(names):
            if name not in coords:
                coords[name] = tuple(
                    _label(pairs[c].values[i]) if c in pairs.coords else "" for c in labels
                )
        values = _variables(pairs, units.dim)
        variables.update(dict.fromkeys(values))
        per_run[tag] = (names, values)
    return coords, variables, per_run


def _run_columns(
    run: _RunUnits, order: list[str], variables: dict[str, None]
) -> tuple[np.ndarray, dict[str, Any]]:
    """The rows of one run's units among the units ``order``, and its ``present``, ``missing``
    and ``values`` over them."""
    names, values = run
    index = {name: i for i, name in enumerate(order)}
    rows = np.array([index[n] for n in names], dtype=np.int64)
    present = np.zeros(len(order), bool)
    present[rows] = True
    columns = {}
    for name in variables:
        column: list[Any] = [None] * len(order)
        if name in values:
            for row, value in zip(rows.tolist(), values[name].tolist(), strict=True):
                column[row] = _number(value)
        columns[name] = column
    return rows, {
        "present": present.tolist(),
        "missing": int(len(order) - present.sum()),
        "values": columns,
    }


def _run_images(
    inspection: Inspection, tag: str, rows: np.ndarray, size: int, page_dir: Path
) -> list[str | None]:
    """The match pictures of run ``tag`` at the ``rows`` of its units among ``size``: their URLs
    from ``page_dir``, None where the run has none."""
    images: list[str | None] = [None] * size
    pairs = inspection.pairs[tag]
    if inspection.units.pictures and "match_image" in pairs:
        for row, relative in zip(rows.tolist(), pairs["match_image"].values, strict=True):
            target = inspection.directories[tag] / _label(relative)
            if target.is_file():
                images[row] = _url(target, page_dir)
    return images


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------


def _environment() -> jinja2.Environment:
    environment = page_environment("metricalc.experiment")
    # strict JSON (no NaN / Infinity tokens): the script parses it with JSON.parse
    environment.policies["json.dumps_kwargs"] = {"sort_keys": False, "allow_nan": False}
    return environment


def _summary_table(inspection: Inspection) -> dict[str, Any]:
    """Headers and rows of the page's summary table (the columns of the terminal table)."""
    shown = [c for c in SUMMARY_COLUMNS if any(c[0] in s for s in inspection.summaries.values())]
    rows = []
    for k, tag in enumerate(inspection.tags):
        values = inspection.summaries[tag]
        rows.append(
            {
                "tag": tag,
                "color": COLORS[k % len(COLORS)],
                "pairs": int(inspection.pairs[tag].sizes.get(inspection.units.dim, 0)),
                "cells": [_cell(values.get(key), percent) for key, _, percent in shown],
            }
        )
    return {"headers": [header for _, header, _ in shown], "rows": rows}


def render_page(inspection: Inspection, *, page_dir: str | os.PathLike[str]) -> str:
    """The HTML page of :func:`write_page` as text, for a page in the folder ``page_dir`` (the
    match pictures are referenced relative to it)."""
    return (
        _environment()
        .get_template("inspect.html")
        .render(
            benchmark=inspection.benchmark,
            tags=inspection.tags,
            unit=inspection.units,
            summary=_summary_table(inspection),
            differences=setting_differences(inspection),
            data=page_data(inspection, page_dir=page_dir),
        )
    )


def default_page_path(
    benchmark: str, tags: Sequence[str], *, outputs: str | os.PathLike[str] = DEFAULT_OUTPUTS
) -> Path:
    """Where ``metricalc inspect`` writes its page without ``--out``:
    ``<outputs>/inspect/<benchmark>/<tag1>_vs_<tag2>....html`` (a hash instead of the tags when
    that name would be too long for a file system).

    Examples
    --------
    >>> default_page_path("hpatches", ["sift", "orb"]).as_posix()
    'outputs/inspect/hpatches/sift_vs_orb.html'
    """
    stem = "_vs_".join(tags)
    if len(stem) > 200:
        digest = hashlib.sha256(stem.encode()).hexdigest()[:12]
        stem = f"{tags[0][:60]}_vs_{len(tags) - 1}_more_{digest}"
    return Path(outputs) / "inspect" / benchmark / f"{stem}.html"


def write_page(inspection: Inspection, path: str | os.PathLike[str]) -> Path:
    """Write the interactive page of ``inspection`` to ``path`` (through a temporary file and a
    rename); returns the path.

    Raises
    ------
    InvalidInputError
        ``path`` is a directory.
    """
    path = Path(path)
    if path.is_dir():
        raise InvalidInputError(f"--out {path} is a directory; expected an .html file path")
    atomic_write(path, render_page(inspection, page_dir=path.parent))
    return path
