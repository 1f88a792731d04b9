"""Runs to inspect side by side: their summaries, per-unit tables and the settings they differ in.

:func:`load_runs` reads the run folders ``<outputs>/results/<benchmark>/<tag>/``
(``summaries.json`` and the per-unit group of ``results.h5``, the benchmark's ``units_group``;
nothing is recomputed) into an :class:`Inspection`; :func:`setting_differences` and
:func:`setting_labels` name the data and eval settings in which the runs differ. The page drawn
from them is :mod:`metricalc.experiment.inspect`'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.experiment.config import check_tag
from metricalc.experiment.results import open_pairs
from metricalc.experiment.run import DEFAULT_OUTPUTS, get_benchmark
from metricalc.experiment.rundir import RunDir

__all__ = [
    "UNITS",
    "Inspection",
    "Units",
    "load_runs",
    "setting_differences",
    "setting_labels",
]

@dataclass(frozen=True)
class Units:
    """What one point of the page stands for, per ``units_group`` of a benchmark.

    Attributes
    ----------
    dim : str
        The dimension of the units in the ``results.h5`` group (``image_pair``, ``file``).
    name, short : str
        How the page names a unit (``image pair``, ``pair``); the plural adds an ``s``.
    labels : tuple of (str, str)
        The coordinates the page shows next to a unit's id, with the word before the value
        (``""``: the value alone), e.g. ``(("scene", "scene"), ("pair", "pair"), ("split", ""))``
        reads "v_a/1-2  (scene v_a, pair 1-2, viewpoint)".
    pictures : bool
        Whether a unit has match pictures (the coordinate ``match_image``).
    """

    dim: str
    name: str
    short: str
    labels: tuple[tuple[str, str], ...]
    pictures: bool


UNITS = {
    "pairs": Units(
        "image_pair",
        "image pair",
        "pair",
        (("scene", "scene"), ("pair", "pair"), ("split", "")),
        pictures=True,
    ),
    "files": Units(
        "file",
        "benchmark file",
        "file",
        (("split", ""), ("difficulty", ""), ("size", "size")),
        pictures=False,
    ),
}
"""The units of each ``units_group`` (:class:`~metricalc.experiment.benchmark.Benchmark`)."""


@dataclass(frozen=True)
class Inspection:
    """The runs being inspected, read from their folders (:func:`load_runs`).

    Attributes
    ----------
    benchmark : str
        The benchmark name.
    tags : tuple of str
        The experiments, in the order given (the first is the reference of ``diff_only``).
    directories : dict
        tag -> run folder.
    summaries : dict
        tag -> the content of ``summaries.json``.
    pairs : dict
        tag -> the per-unit metrics over ``units.dim``: per image pair (``results.h5`` group
        ``pairs``) or per benchmark file (group ``files``, its ``descriptor`` dim dropped).
    units : Units
        What the units are (default: image pairs).
    settings : dict
        tag -> the evaluation settings of the run: the ``data`` and ``eval`` sections of its
        ``conf.yaml``, flattened to dotted keys (``eval.tau``, ``eval.ransac_th``, ...). Runs
        that differ in them are labelled (:func:`setting_differences`).
    """

    benchmark: str
    tags: tuple[str, ...]
    directories: dict[str, Path]
    summaries: dict[str, dict[str, Any]]
    pairs: dict[str, xr.Dataset]
    units: Units = UNITS["pairs"]
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)


SETTING_SECTIONS = ("data", "eval")
"""The sections of a run's configuration that define how it was evaluated (the thresholds
``eval.tau`` and ``eval.ransac_th``, the tie policy, the data); ``model`` is what the runs
compare."""


def _flat(section: Any, prefix: str) -> dict[str, Any]:
    if not isinstance(section, dict):
        return {prefix: section}
    out: dict[str, Any] = {}
    for key, value in section.items():
        out.update(_flat(value, f"{prefix}.{key}"))
    return out


def _settings(rundir: RunDir) -> dict[str, Any]:
    conf = rundir.read_conf() or {}
    out: dict[str, Any] = {}
    for name in SETTING_SECTIONS:
        if name in conf:
            out.update(_flat(conf[name], name))
    return out


def setting_differences(inspection: Inspection) -> dict[str, dict[str, Any]]:
    """The evaluation settings in which the runs differ: ``{key: {tag: value}}`` (None where a
    run's configuration lacks the key), in key order.

    ``metricalc inspect`` shows runs evaluated with different thresholds side by side (one may
    want to see what ``ransac_th`` changes) but never silently: the terminal prints these
    differences before the table and labels each run with its values (:func:`setting_labels`),
    and the page shows them above the summaries and in the legend.

    Examples
    --------
    >>> runs = Inspection("hpatches", ("a", "b"), {}, {}, {},
    ...                   settings={"a": {"eval.tau": 3.0, "eval.k": [1, 5]},
    ...                             "b": {"eval.tau": 5.0, "eval.k": [1, 5]}})
    >>> setting_differences(runs)
    {'eval.tau': {'a': 3.0, 'b': 5.0}}
    >>> setting_labels(runs)
    {'a': 'a (eval.tau=3.0)', 'b': 'b (eval.tau=5.0)'}
    """
    keys = sorted({k for values in inspection.settings.values() for k in values})
    out = {}
    for key in keys:
        values = {tag: inspection.settings.get(tag, {}).get(key) for tag in inspection.tags}
        if len({repr(v) for v in values.values()}) > 1:
            out[key] = values
    return out


def setting_labels(inspection: Inspection) -> dict[str, str]:
    """Each run's tag followed by its values of the settings in which the runs differ
    (``"orb (eval.ransac_th=5.0)"``), the tag alone when they do not differ."""
    differences = setting_differences(inspection)
    labels = {}
    for tag in inspection.tags:
        own = ", ".join(f"{key}={values[tag]}" for key, values in differences.items())
        labels[tag] = f"{tag} ({own})" if own else tag
    return labels


def _known_tags(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "conf.yaml").exists())


def _no_results(rundir: RunDir) -> str:
    """Why a run folder has no results, for the error message."""
    record = None
    with contextlib.suppress(InvalidInputError):  # an unreadable run.json: say what is missing
        record = rundir.read_json(rundir.run_json)
    if record and record.get("status") not in (None, "ok"):
        return f"its last run ended with status {record['status']!r}: {record.get('error', '')}"
    missing = [p.name for p in (rundir.results, rundir.summaries) if not p.is_file()]
    return f"{' and '.join(missing)} missing (the run has not finished its evaluation)"


def load_runs(
    benchmark: str,
    tags: Sequence[str],
    *,
    outputs: str | os.PathLike[str] = DEFAULT_OUTPUTS,
) -> Inspection:
    """Read the summaries and per-unit metrics of the runs ``tags`` of ``benchmark``.

    Parameters
    ----------
    benchmark : str
        A benchmark of :data:`metricalc.experiment.BENCHMARKS` (``"hpatches"``, ``"patches"``).
    tags : sequence of str
        One or more experiment tags, each run with ``metricalc run``; the first is the
        reference of the page's ``diff_only`` mode.
    outputs : path
        The outputs root of the runs (default ``outputs``).

    Returns
    -------
    Inspection

    Raises
    ------
    InvalidInputError
        No tag, a malformed tag, a tag given twice, an unknown benchmark, tags without a run
        folder (all named, with the tags there are), runs without results (each named with the
        reason: a failed last run and its error, or the missing files), an unreadable
        ``results.h5``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     load_runs("hpatches", ["sift"], outputs=tmp)
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: no run of benchmark 'hpatches' with tag 'sift' under ...
    """
    group = get_benchmark(benchmark).units_group
    tags = [check_tag(tag) for tag in tags]
    if not tags:
        raise InvalidInputError("give at least one experiment tag to inspect")
    repeated = sorted({t for t in tags if tags.count(t) > 1})
    if repeated:
        raise InvalidInputError(f"tag(s) {repeated} given more than once; name each run once")
    rundirs = {tag: RunDir(Path(outputs), benchmark, tag) for tag in tags}
    root = Path(outputs) / "results" / benchmark
    missing = [tag for tag, rundir in rundirs.items() if not rundir.conf.is_file()]
    if missing:
        known = _known_tags(root)
        names = ", ".join(repr(t) for t in missing)
        raise InvalidInputError(
            f"no run of benchmark {benchmark!r} with tag {names} under {root}; it has "
            f"{known if known else 'no runs'} (run `metricalc run {benchmark} --tag TAG` "
            "first, or give --outputs)"
        )
    unfinished = [
        f"tag {tag!r} ({rundir.path}): {_no_results(rundir)}"
        for tag, rundir in rundirs.items()
        if not rundir.has_results()
    ]
    if unfinished:
        raise InvalidInputError(
            "no results to inspect for " + "; ".join(unfinished) + f"; rerun `metricalc run "
            f"{benchmark} --tag TAG` (with --overwrite_eval or --overwrite if needed)"
        )
    return Inspection(
        benchmark=benchmark,
        tags=tuple(tags),
        directories={tag: r.path for tag, r in rundirs.items()},
        summaries={tag: r.read_json(r.summaries) or {} for tag, r in rundirs.items()},
        pairs={tag: _units(open_pairs(r.results, group=group), r) for tag, r in rundirs.items()},
        units=UNITS[group],
        settings={tag: _settings(r) for tag, r in rundirs.items()},
    )


def _units(table: xr.Dataset, rundir: RunDir) -> xr.Dataset:
    """The per-unit table of one run without its ``descriptor`` dim (a run has one descriptor,
    named by its tag, in the per-file table of ``patches``)."""
    if "descriptor" not in table.dims:
        return table
    if table.sizes["descriptor"] != 1:
        raise InvalidInputError(
            f"{rundir.results} holds {table.sizes['descriptor']} descriptors in its per-unit "
            "table; expected the one of the run (rerun with --overwrite_eval)"
        )
    return table.isel(descriptor=0, drop=True)


# --------------------------------------------------------------------------------------------
